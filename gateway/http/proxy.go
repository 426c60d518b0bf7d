package http

import "github.com/valyala/fasthttp"

// proxy passes the booking API (catalog, holds, payments, bookings),
// sign-in, the fan's account and the gate's check-in to the core: the pages
// talk to one origin, and the core stays off the internet. The core is told
// the fan's address (coreclient.ClientAddrHeader, whatever the client sent
// in it replaced) for its per-address limits. The core's answers, errors
// included, go back as they are; only when it gives none does the gateway
// answer (busy, core_unavailable).
func (s *Server) proxy(ctx *fasthttp.RequestCtx, _ params) error {
	return s.core.Proxy(ctx, s.clientIP(ctx))
}
