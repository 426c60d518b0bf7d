package http

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/health"
)

// proxy passes the booking API (holds, payments, bookings), sign-in, the
// fan's account, the gate's check-in and the provider's webhooks to the
// core: the pages talk to one origin, and the core stays off the internet. The core is told
// the fan's address (coreclient.ClientAddrHeader, whatever the client sent
// in it replaced) for its per-address limits. The core's answers, errors
// included, go back as they are; only when it gives none does the gateway
// answer (busy, core_unavailable). Holds and the calls on holds and
// bookings are the core's health as fans meet it: each is recorded
// (Config.Health) with its outcome and latency.
func (s *Server) proxy(ctx *fasthttp.RequestCtx, _ params) error {
	kind := health.KindOf(ctx.Method(), ctx.Path())
	start := time.Now()
	err := s.core.Proxy(ctx, s.clientIP(ctx))
	if kind != health.KindNone {
		o := health.OutcomeOf(ctx.Response.StatusCode(), ctx.Response.Body(), err == nil, gateway.ErrorCode(err) == gateway.EBusy)
		s.cfg.Health.Observe(kind, o, time.Since(start))
	}
	return err
}

// maxWebhookBody bounds a webhook's body below the server's request bound:
// a provider's event is a few KiB, and the gateway holds each body it
// passes on in memory.
const maxWebhookBody = 32 << 10

// webhook passes the payment provider's webhooks to the core, which checks
// their signatures (the gateway holds no webhook secret and changes
// nothing a signature covers): the provider's webhook URL can name the
// gateways, and the core stay private. A body over maxWebhookBody is
// refused before the core sees it.
func (s *Server) webhook(ctx *fasthttp.RequestCtx, p params) error {
	if len(ctx.PostBody()) > maxWebhookBody {
		return gateway.Errorf(gateway.ETooLarge, "a webhook body is at most %d bytes", maxWebhookBody)
	}
	return s.proxy(ctx, p)
}
