package http

import (
	"errors"
	"io/fs"
	"mime"
	"path"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway/web"
)

// page serves an embedded file; pages are small and change with the binary.
func (s *Server) page(ctx *fasthttp.RequestCtx, name string) {
	b, err := fs.ReadFile(web.Static, name)
	if err != nil {
		fail(ctx, 404, "not_found", "no such page")
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	ctx.SetContentType(ct)
	ctx.Response.Header.Set("Cache-Control", "public, max-age=60")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	ctx.SetBody(b)
}

// webConfig tells the pages where the payment provider's checkout is.
func (s *Server) webConfig(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "public, max-age=60")
	writeJSON(ctx, 200, map[string]string{"checkout_url": s.CheckoutURL})
}

// proxy passes the booking API (catalog, holds, payments, bookings) to the
// core: the pages talk to one origin, and the core stays off the internet.
func (s *Server) proxy(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	req.Header.Del("Connection")
	req.SetHost(s.core.Addr)
	if err := s.core.DoTimeout(req, &ctx.Response, 30*time.Second); err != nil {
		ctx.Response.Reset()
		if errors.Is(err, fasthttp.ErrNoFreeConns) {
			// Every connection to the core has been busy for a while: the
			// core is saturated, so shed the request rather than pile on.
			fail(ctx, 503, "busy", "the booking service is busy; try again in a moment")
			return
		}
		s.Log.Warn("the core did not answer", "path", string(ctx.Path()), "err", err)
		fail(ctx, 502, "core_unavailable", "the booking service did not answer; try again")
	}
}

func newCoreClient(coreURL string) *fasthttp.HostClient {
	host := strings.TrimPrefix(strings.TrimPrefix(coreURL, "http://"), "https://")
	// A request waits up to 3 s for one of the 512 connections before it is
	// shed with 503 (without the wait, any burst past 512 was refused at once).
	return &fasthttp.HostClient{Addr: host, ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second,
		MaxConns: 512, MaxConnWaitTimeout: 3 * time.Second, DisablePathNormalizing: true}
}
