package http

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// seatmaps caches, per event, the static layout (fetched from the core once)
// and the availability bitmap (read from Redis at most once a second), so
// however many fans look at the map, the stores see almost nothing of it.
type seatmaps struct {
	mu     sync.Mutex
	layout map[int64][]byte
	bits   map[int64]bitsAt
	counts map[int64]*countsAt
}

// countsAt is an event's seat counts (the core's /stats: available, held,
// sold) as of a moment. One request at a time asks the core (inflight);
// the others serve the last answer meanwhile, or wait for the first.
type countsAt struct {
	code     int
	body     []byte
	at       time.Time
	inflight chan struct{}
}

type bitsAt struct {
	b  []byte
	at time.Time
}

// bitsMaxAge is how stale the availability may be: browsing may lag a
// second; buying is decided by the core.
const bitsMaxAge = time.Second

func (s *Server) layout(ctx *fasthttp.RequestCtx, idStr string) {
	ev, ok := eventID(idStr)
	if !ok {
		fail(ctx, 404, "not_found", "no such event")
		return
	}
	s.maps.mu.Lock()
	b, ok := s.maps.layout[ev]
	s.maps.mu.Unlock()
	if !ok {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(c, http.MethodGet, fmt.Sprintf("%s/v1/events/%d/layout", s.Room.CoreURL, ev), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fail(ctx, 503, "unavailable", "the seat layout cannot be read right now")
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fail(ctx, resp.StatusCode, "not_found", "no seat layout for this event")
			return
		}
		if b, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20)); err != nil {
			fail(ctx, 503, "unavailable", "the seat layout cannot be read right now")
			return
		}
		s.maps.mu.Lock()
		s.maps.layout[ev] = b
		s.maps.mu.Unlock()
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=86400, immutable")
	ctx.SetBody(b)
}

func (s *Server) seatmap(ctx *fasthttp.RequestCtx, idStr string) {
	ev, ok := eventID(idStr)
	if !ok {
		fail(ctx, 404, "not_found", "no such event")
		return
	}
	now := time.Now()
	s.maps.mu.Lock()
	cur, ok := s.maps.bits[ev]
	s.maps.mu.Unlock()
	if !ok || now.Sub(cur.at) > bitsMaxAge {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b, err := s.Room.Store.Seatmap(c, ev)
		switch {
		case err != nil && ok:
			// Redis is down: the last map, older, is still a fair picture.
		case err != nil:
			fail(ctx, 503, "unavailable", "the seat map cannot be read right now")
			return
		case b == nil:
			fail(ctx, 404, "not_found", "no seat map for this event (not on sale, or general admission)")
			return
		default:
			cur = bitsAt{b: b, at: now}
			s.maps.mu.Lock()
			s.maps.bits[ev] = cur
			s.maps.mu.Unlock()
		}
	}
	free := 0
	for _, x := range cur.b {
		for ; x != 0; x &= x - 1 {
			free++
		}
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=1, stale-while-revalidate=1")
	writeJSON(ctx, 200, map[string]any{"event_id": ev, "layout": fmt.Sprintf("/v1/events/%d/layout", ev),
		"available":       base64.StdEncoding.EncodeToString(cur.b),
		"available_count": free, "bits": len(cur.b) * 8, "as_of": cur.at,
		"encoding": "bit i (most significant first) of the base64 bytes is seat position i of the layout; 1 = can be held"})
}

// counts serves the event's seat counts (available, held, sold), asking the
// core at most about once a second whatever the crowd does: a sold-out page
// left open by thousands of fans must not become thousands of counts.
func (s *Server) counts(ctx *fasthttp.RequestCtx, idStr string) {
	ev, ok := eventID(idStr)
	if !ok {
		fail(ctx, 404, "not_found", "no such event")
		return
	}
	now := time.Now()
	s.maps.mu.Lock()
	cur := s.maps.counts[ev]
	if cur == nil {
		cur = &countsAt{}
		s.maps.counts[ev] = cur
	}
	switch {
	case cur.body != nil && now.Sub(cur.at) <= bitsMaxAge:
	case cur.inflight != nil && cur.body != nil:
		// Someone is asking the core: the last answer, a little older, will do.
	case cur.inflight != nil:
		wait := cur.inflight
		s.maps.mu.Unlock()
		select {
		case <-wait:
		case <-time.After(5 * time.Second):
		}
		s.maps.mu.Lock()
	default:
		done := make(chan struct{})
		cur.inflight = done
		s.maps.mu.Unlock()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI(fmt.Sprintf("http://%s/v1/events/%d/stats", s.core.Addr, ev))
		err := s.core.DoTimeout(req, resp, 5*time.Second)
		s.maps.mu.Lock()
		switch {
		case err != nil:
		case resp.StatusCode() == fasthttp.StatusOK:
			cur.code, cur.body, cur.at = fasthttp.StatusOK, append([]byte(nil), resp.Body()...), now
		case cur.body == nil:
			cur.code, cur.body = resp.StatusCode(), append([]byte(nil), resp.Body()...) // 404: passed on, not kept fresh
		}
		cur.inflight = nil
		close(done)
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
	code, body := cur.code, cur.body
	s.maps.mu.Unlock()
	if body == nil {
		fail(ctx, 502, "core_unavailable", "the booking service did not answer; try again")
		return
	}
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	if code == fasthttp.StatusOK {
		ctx.Response.Header.Set("Cache-Control", "public, max-age=1")
	}
	ctx.SetBody(body)
}
