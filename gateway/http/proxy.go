package http

import "github.com/valyala/fasthttp"

// proxy passes the booking API (catalog, holds, payments, bookings) to the
// core: the pages talk to one origin, and the core stays off the internet.
// The core's answers, errors included, go back as they are; only when it
// gives none does the gateway answer (busy, core_unavailable).
func (s *Server) proxy(ctx *fasthttp.RequestCtx, _ params) error { return s.core.Proxy(ctx) }
