package http

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/coreclient"
	"github.com/onsale/onsale/shared/seatmap"
)

// reads are the caches of the public reads (readcache.go), one per kind so
// that a flood of one kind (counts of many events) cannot push another
// (the layouts) out: the catalog and events, the seat layouts, the seat
// counts (the core's /stats), the availability bits (Redis). Each is
// bounded in bytes, and its refusals in count; none holds an entry per id
// asked for that is not an event.
type reads struct {
	events, layouts, counts, bits *readCache
}

// Bounds of the caches (answers' bytes; refusals' count). A stadium's
// layout is a few MiB, its bits 5 KiB, its counts and its event well under
// 1 KiB.
const (
	eventsBytes  = 8 << 20
	layoutsBytes = 64 << 20
	countsBytes  = 4 << 20
	bitsBytes    = 16 << 20
	maxRefusals  = 4096
)

func newReads() *reads {
	return &reads{events: newReadCache(eventsBytes, maxRefusals), layouts: newReadCache(layoutsBytes, maxRefusals),
		counts: newReadCache(countsBytes, maxRefusals), bits: newReadCache(bitsBytes, maxRefusals)}
}

// serveRead answers with a cached read of the core's (what it is: what):
// its status, body, content type and Cache-Control as the core gave them;
// the core's 404 as the gateway's not_found.
func (s *Server) serveRead(ctx *fasthttp.RequestCtx, c *readCache, pathQuery, what string) error {
	a, _, err := c.get(pathQuery, func(cc context.Context) (coreclient.Answer, error) { return s.core.Read(cc, pathQuery, what) })
	switch {
	case err != nil:
		return err
	case a.Status == fasthttp.StatusNotFound:
		switch what {
		case "event", "catalog":
			return gateway.Errorf(gateway.ENotFound, "no such %s", what)
		case coreDocumentWhat:
			return gateway.Errorf(gateway.ENotFound, "the core serves no OpenAPI document")
		}
		return gateway.Errorf(gateway.ENotFound, "no %s for this event", what)
	}
	ctx.SetStatusCode(a.Status)
	ctx.SetContentType(a.ContentType)
	if a.CacheControl != "" {
		ctx.Response.Header.Set(fasthttp.HeaderCacheControl, a.CacheControl)
	}
	ctx.SetBody(a.Body)
	return nil
}

// catalog serves the catalog (GET /v1/events), keyed by the filters the
// core reads (city, kind, date) in one spelling (catalogFilters), and asks
// the core with only those: other parameters cannot make keys, and a
// filter the core would refuse is refused here, without a core query.
func (s *Server) catalog(ctx *fasthttp.RequestCtx, _ params) error {
	q, err := catalogFilters(ctx.QueryArgs())
	if err != nil {
		return err
	}
	key := "/v1/events"
	if len(q) > 0 {
		key += "?" + q.Encode()
	}
	return s.serveRead(ctx, s.reads.events, key, "catalog")
}

// maxCityLen bounds the city filter, in bytes: no city's name comes near
// it (the longest in use are about 60), and a longer one matches nothing.
const maxCityLen = 100

// catalogFilters reads the catalog's filters as the core does (core/http
// listEvents and its eventsSQL): city matched in any case, so it is keyed
// lowercased; kind one of concert or movie, exactly; date YYYY-MM-DD. An
// empty value is no filter. A value the core would refuse (kind, date),
// and a city that cannot name one (not UTF-8, control characters, over
// maxCityLen), is invalid_request, naming the filter.
func catalogFilters(args *fasthttp.Args) (url.Values, error) {
	q := url.Values{}
	if v := string(args.Peek("city")); v != "" {
		if len(v) > maxCityLen || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return nil, gateway.Errorf(gateway.EInvalid, "city must be a city's name (at most %d bytes)", maxCityLen)
		}
		q.Set("city", strings.ToLower(v))
	}
	if v := string(args.Peek("kind")); v != "" {
		if v != "concert" && v != "movie" {
			return nil, gateway.Errorf(gateway.EInvalid, "kind must be concert or movie")
		}
		q.Set("kind", v)
	}
	if v := string(args.Peek("date")); v != "" {
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return nil, gateway.Errorf(gateway.EInvalid, "date must be YYYY-MM-DD")
		}
		q.Set("date", d.Format(time.DateOnly))
	}
	switch v := string(args.Peek("past")); v {
	case "", "false":
	case "true":
		q.Set("past", v)
	default:
		return nil, gateway.Errorf(gateway.EInvalid, "past must be true or false")
	}
	if v := string(args.Peek("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxCatalogPage {
			return nil, gateway.Errorf(gateway.EInvalid, "limit must be 1 to %d: page with cursor for more", maxCatalogPage)
		}
		q.Set("limit", strconv.Itoa(n))
	}
	if v := string(args.Peek("cursor")); v != "" {
		if len(v) > 64 || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return nil, gateway.Errorf(gateway.EInvalid, "cursor is not one this API gave: pass next_cursor back unchanged")
		}
		q.Set("cursor", v)
	}
	return q, nil
}

// maxCatalogPage is the core's largest catalog page (core.MaxPage).
const maxCatalogPage = 200

// event serves one event's catalog entry (GET /v1/events/{id}).
func (s *Server) event(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	return s.serveRead(ctx, s.reads.events, "/v1/events/"+strconv.FormatInt(ev, 10), "event")
}

// layout serves an event's seat layout, which never changes: cached here
// (for as long as the core's Cache-Control says, up to maxTTL) and by
// browsers.
func (s *Server) layout(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	return s.serveRead(ctx, s.reads.layouts, fmt.Sprintf("/v1/events/%d/layout", ev), "seat layout")
}

// counts serves the event's seat counts (available, held, sold), asking the
// core at most once per its max-age (1 s) whatever the crowd does: a
// sold-out page left open by thousands of fans must not become thousands
// of counts.
func (s *Server) counts(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	return s.serveRead(ctx, s.reads.counts, fmt.Sprintf("/v1/events/%d/stats", ev), "seat counts")
}

// seatmapTTL is how stale the availability may be: browsing may lag a
// second; buying is decided by the core.
const seatmapTTL = "public, max-age=1"

// seatmap serves which seats can be held, from the bitmap the core keeps in
// Redis (its format: shared/seatmap), read at most once a second; with
// Redis down, the last map.
func (s *Server) seatmap(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	a, at, err := s.reads.bits.get(strconv.FormatInt(ev, 10), func(c context.Context) (coreclient.Answer, error) {
		b, err := s.store.Seatmap(c, ev)
		switch {
		case err != nil:
			return coreclient.Answer{}, gateway.Errorf(gateway.EUnavailable, "the seat map cannot be read right now")
		case b == nil:
			// Not kept: the core writes the map at onsale, and a fan
			// must see it then; Redis answers a missing key cheaply.
			return coreclient.Answer{Status: fasthttp.StatusNotFound, CacheControl: "no-store"}, nil
		}
		return coreclient.Answer{Status: fasthttp.StatusOK, Body: b, CacheControl: seatmapTTL}, nil
	})
	switch {
	case err != nil:
		return err
	case a.Status != fasthttp.StatusOK:
		return gateway.Errorf(gateway.ENotFound, "no seat map for this event (not on sale, or general admission)")
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=1, stale-while-revalidate=1")
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"event_id": ev, "layout": fmt.Sprintf("/v1/events/%d/layout", ev),
		"available":       base64.StdEncoding.EncodeToString(a.Body),
		"available_count": seatmap.Count(a.Body), "bits": len(a.Body) * 8, "as_of": at, "encoding": seatmap.Encoding})
	return nil
}
