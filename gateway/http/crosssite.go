package http

import (
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
)

// refuseCrossSite refuses a join or a leave sent by another site's page: a
// hidden form there could otherwise take a fan a fresh place at the back
// of the line (the fan's Lax cookies are not sent with it, its answer's
// cookies are kept) or give a place up. The browser says where a request
// comes from: Sec-Fetch-Site (every current browser) and, failing that,
// Origin (sent with every cross-origin POST and DELETE, and "null" from
// opaque origins such as sandboxed frames). A request with neither is not
// a browser's cross-site one (the load tools, curl, apps) and goes on.
// Same-site (a sibling subdomain of the operator's) is allowed: it is the
// operator's own. Origin is compared by host alone: a TLS-ending balancer
// that does not say so would make the scheme look different, and no page
// can forge its Origin's host.
func refuseCrossSite(ctx *fasthttp.RequestCtx) error {
	switch string(ctx.Request.Header.Peek("Sec-Fetch-Site")) {
	case "cross-site":
		return crossSite()
	case "same-origin", "same-site", "none":
		return nil
	}
	origin := string(ctx.Request.Header.Peek("Origin"))
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, string(ctx.Host())) {
		return crossSite()
	}
	return nil
}

func crossSite() error {
	return gateway.Errorf(gateway.ECrossSite, "another site's page cannot join or leave the line for you: open the sale's own page")
}
