package http

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/shared/seatmap"
)

// seatmaps caches, per event, the static layout (fetched from the core once),
// the availability bitmap (read from Redis at most once a second) and the
// seat counts (asked of the core about once a second), so however many fans
// look at the map, the stores see almost nothing of it.
type seatmaps struct {
	mu     sync.Mutex
	layout map[int64][]byte
	bits   map[int64]bitsAt
	counts map[int64]*countsAt
}

func newSeatmaps() *seatmaps {
	return &seatmaps{layout: map[int64][]byte{}, bits: map[int64]bitsAt{}, counts: map[int64]*countsAt{}}
}

// countsAt is an event's seat counts (the core's /stats: available, held,
// sold) as of a moment. One request at a time asks the core (inflight);
// the others serve the last answer meanwhile, or wait for the first. err
// is the core's last refusal while there is no answer to serve.
type countsAt struct {
	body     []byte
	err      error
	at       time.Time
	inflight chan struct{}
}

type bitsAt struct {
	b  []byte
	at time.Time
}

// maxAge is how stale the availability and the counts may be: browsing
// may lag a second; buying is decided by the core.
const maxAge = time.Second

// layout serves an event's seat layout, which never changes: asked of the
// core once, then cached here and by browsers.
func (s *Server) layout(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	s.maps.mu.Lock()
	b, ok := s.maps.layout[ev]
	s.maps.mu.Unlock()
	if !ok {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if b, err = s.core.Layout(c, ev); err != nil {
			return err
		}
		s.maps.mu.Lock()
		s.maps.layout[ev] = b
		s.maps.mu.Unlock()
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=86400, immutable")
	ctx.SetBody(b)
	return nil
}

// seatmap serves which seats can be held, from the bitmap the core keeps in
// Redis (its format: shared/seatmap), read at most once a second; with
// Redis down, the last map.
func (s *Server) seatmap(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	now := time.Now()
	s.maps.mu.Lock()
	cur, ok := s.maps.bits[ev]
	s.maps.mu.Unlock()
	if !ok || now.Sub(cur.at) > maxAge {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b, err := s.store.Seatmap(c, ev)
		switch {
		case err != nil && ok:
			// Redis is down: the last map, older, is still a fair picture.
		case err != nil:
			return gateway.Errorf(gateway.EUnavailable, "the seat map cannot be read right now")
		case b == nil:
			return gateway.Errorf(gateway.ENotFound, "no seat map for this event (not on sale, or general admission)")
		default:
			cur = bitsAt{b: b, at: now}
			s.maps.mu.Lock()
			s.maps.bits[ev] = cur
			s.maps.mu.Unlock()
		}
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=1, stale-while-revalidate=1")
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"event_id": ev, "layout": fmt.Sprintf("/v1/events/%d/layout", ev),
		"available":       base64.StdEncoding.EncodeToString(cur.b),
		"available_count": seatmap.Count(cur.b), "bits": len(cur.b) * 8, "as_of": cur.at, "encoding": seatmap.Encoding})
	return nil
}

// counts serves the event's seat counts (available, held, sold), asking the
// core at most about once a second whatever the crowd does: a sold-out page
// left open by thousands of fans must not become thousands of counts.
func (s *Server) counts(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	now := time.Now()
	s.maps.mu.Lock()
	cur := s.maps.counts[ev]
	if cur == nil {
		cur = &countsAt{}
		s.maps.counts[ev] = cur
	}
	switch {
	case cur.body != nil && now.Sub(cur.at) <= maxAge:
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
		b, err := s.core.Stats(context.Background(), ev)
		s.maps.mu.Lock()
		switch {
		case err == nil:
			cur.body, cur.err, cur.at = b, nil, now
		case cur.body == nil:
			cur.err = err // a refusal (404): passed on, not kept fresh
		}
		cur.inflight = nil
		close(done)
	}
	body, err := cur.body, cur.err
	s.maps.mu.Unlock()
	switch {
	case body != nil:
	case err != nil:
		return err
	default:
		return gateway.Errorf(gateway.ECoreUnavailable, "the booking service did not answer; try again")
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=1")
	ctx.SetBody(body)
	return nil
}
