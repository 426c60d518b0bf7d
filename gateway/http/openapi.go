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

// coreDocument answers the core's OpenAPI document (its GET
// /openapi.yaml): the core stays off the internet, so integrators read both
// documents here. It is a cached read, as the seat layouts are (for the
// core's max-age, one fetch at a time): asking for it cannot take the
// connections to the core that fans' holds and payments need.
func (s *Server) coreDocument(ctx *fasthttp.RequestCtx, _ params) error {
	return s.serveRead(ctx, s.reads.layouts, "/openapi.yaml", coreDocumentWhat)
}

// coreDocumentWhat names the core's document among the cached reads.
const coreDocumentWhat = "OpenAPI document"
