package http

import (
	"io/fs"
	"mime"
	"path"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/web"
)

// page serves one embedded page whatever the path's captures.
func page(name string) handler {
	return func(s *Server, ctx *fasthttp.RequestCtx, _ params) error { return serveFile(ctx, name) }
}

// static serves the embedded file the path names.
func (s *Server) static(ctx *fasthttp.RequestCtx, p params) error { return serveFile(ctx, p.name) }

// serveFile serves an embedded file; pages are small and change with the binary.
func serveFile(ctx *fasthttp.RequestCtx, name string) error {
	b, err := fs.ReadFile(web.Static, name)
	if err != nil {
		return gateway.Errorf(gateway.ENotFound, "no such page")
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	ctx.SetContentType(ct)
	ctx.Response.Header.Set("Cache-Control", "public, max-age=60")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	ctx.Response.Header.Set("Permissions-Policy", permissions(name))
	ctx.SetBody(b)
	return nil
}

// permissions is a page's Permissions-Policy: no page may use the camera,
// the microphone or the location but the gate's scanner, which reads QR
// codes from the camera (getUserMedia, this origin only; the CSP needs no
// change: a camera stream is not a fetch). Frames get nothing either way
// (frame-ancestors 'none').
func permissions(name string) string {
	if name == "gate.html" {
		return "camera=(self), microphone=(), geolocation=()"
	}
	return "camera=(), microphone=(), geolocation=()"
}

// webConfig tells the pages where the payment provider's checkout is and
// which ways to pay to offer.
func (s *Server) webConfig(ctx *fasthttp.RequestCtx, _ params) error {
	ctx.Response.Header.Set("Cache-Control", "public, max-age=60")
	methods := s.cfg.PaymentMethods
	if len(methods) == 0 {
		methods = []string{"upi", "card"}
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"checkout_url": s.cfg.CheckoutURL, "payment_methods": methods})
	return nil
}

func (s *Server) healthz(ctx *fasthttp.RequestCtx, _ params) error {
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz is ready while the room's last tick reached the store for some
// event (room.Healthy: one master failing over does not take the gateway out).
func (s *Server) readyz(ctx *fasthttp.RequestCtx, _ params) error {
	if !s.room.Healthy() {
		return gateway.Errorf(gateway.EUnavailable, "redis is not answering")
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
	return nil
}

func (s *Server) metricsPage(ctx *fasthttp.RequestCtx, _ params) error {
	s.prom(ctx)
	return nil
}

// jwksPage publishes the admit-token keys the core verifies with.
func (s *Server) jwksPage(ctx *fasthttp.RequestCtx, _ params) error {
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	ctx.SetBody(s.jwks)
	return nil
}
