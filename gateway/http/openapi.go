package http

import (
	_ "embed"

	"github.com/valyala/fasthttp"
)

// document is the gateway's OpenAPI document: every route the gateway
// answers itself (the tests hold the handlers to it, and it to the route
// table). The routes it forwards are the core's document's.
//
//go:embed openapi.yaml
var document []byte

// openapiDocument serves the gateway's OpenAPI document.
func (s *Server) openapiDocument(ctx *fasthttp.RequestCtx, _ params) error {
	ctx.SetContentType("application/yaml")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "public, max-age=300")
	ctx.SetBody(document)
	return nil
}

// coreDocument forwards to the core's OpenAPI document (its GET
// /openapi.yaml): the core stays off the internet, so integrators read both
// documents here. The core's answer goes back as it is.
func (s *Server) coreDocument(ctx *fasthttp.RequestCtx, p params) error {
	ctx.Request.URI().SetPath("/openapi.yaml")
	return s.proxy(ctx, p)
}
