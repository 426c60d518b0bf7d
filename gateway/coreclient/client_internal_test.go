package coreclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The gateway's own reads have their own connections: with every proxy
// connection taken by a slow booking request (here the pool is shrunk to
// one), an event's times and a layout are still read at once. A layout is
// read up to 16 MiB, no further.
func TestReadsBesideAFullProxy(t *testing.T) {
	inHold, release := make(chan struct{}, 1), make(chan struct{})
	big := strings.Repeat(" ", maxReadBody+1)
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/holds":
			inHold <- struct{}{}
			<-release // a payment waiting on its provider
		case "/v1/events/1":
			fmt.Fprint(w, `{"onsale_at":"2030-01-01T00:00:00Z","starts_at":"2030-01-02T00:00:00Z"}`)
		case "/v1/events/1/layout":
			fmt.Fprint(w, `{"capacity":1}`)
		case "/v1/events/2/layout":
			fmt.Fprint(w, `{"capacity":1}`+big)
		}
	}))
	defer core.Close()
	defer close(release)
	c := New(core.URL, nil)
	c.proxy.MaxConns = 1

	proxied := make(chan error, 1)
	go func() {
		var rc fasthttp.RequestCtx
		rc.Request.Header.SetMethod("POST")
		rc.Request.SetRequestURI("/v1/holds")
		proxied <- c.Proxy(&rc, "192.0.2.1")
	}()
	<-inHold // the proxy's one connection is taken

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if ev, err := c.Event(ctx, 1); err != nil || ev.OnsaleAt.Year() != 2030 {
		t.Fatalf("Event(1) beside a full proxy = %+v, %v; want the event", ev, err)
	}
	if a, err := c.Read(ctx, "/v1/events/1/layout", "seat layout"); err != nil || string(a.Body) != `{"capacity":1}` {
		t.Fatalf("Read(layout 1) beside a full proxy = %q, %v", a.Body, err)
	}
	if a, err := c.Read(ctx, "/v1/events/2/layout", "seat layout"); err == nil {
		t.Fatalf("Read(layout 2) of %d bytes = %d bytes, nil; want an error past %d", len(big), len(a.Body), maxReadBody)
	}
	select {
	case err := <-proxied:
		t.Fatalf("the held proxy request ended early: %v", err)
	default:
	}
}

// The catalog's view of an event carries what the account_required dial's
// default needs: seated and capacity, as the core serves them.
func TestEventSizeAndDefaultDial(t *testing.T) {
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/events/1": // a stadium
			fmt.Fprint(w, `{"id":1,"onsale_at":"2030-01-01T00:00:00Z","starts_at":"2030-01-02T00:00:00Z","seated":true,"capacity":40000}`)
		case "/v1/events/2": // a cinema screen
			fmt.Fprint(w, `{"id":2,"onsale_at":"2030-01-01T00:00:00Z","starts_at":"2030-01-02T00:00:00Z","seated":true,"capacity":200}`)
		case "/v1/events/3": // a standing festival ground
			fmt.Fprint(w, `{"id":3,"onsale_at":"2030-01-01T00:00:00Z","starts_at":"2030-01-02T00:00:00Z","seated":false,"capacity":60000}`)
		case "/v1/events/4": // exactly the line
			fmt.Fprint(w, `{"id":4,"onsale_at":"2030-01-01T00:00:00Z","starts_at":"2030-01-02T00:00:00Z","seated":true,"capacity":5000}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer core.Close()
	c := New(core.URL, nil)
	for _, tc := range []struct {
		id       int64
		seated   bool
		capacity int
		required bool
	}{{1, true, 40000, true}, {2, true, 200, false}, {3, false, 60000, false}, {4, true, 5000, true}} {
		ev, err := c.Event(context.Background(), tc.id)
		if err != nil || ev.Seated != tc.seated || ev.Capacity != tc.capacity {
			t.Fatalf("Event(%d) = %+v, %v; want seated %v capacity %d", tc.id, ev, err, tc.seated, tc.capacity)
		}
		if d := ev.Dials(); d.AccountRequired != tc.required || d.OnsaleAt != ev.OnsaleAt {
			t.Errorf("Event(%d).Dials().AccountRequired = %v; want %v", tc.id, d.AccountRequired, tc.required)
		}
	}
}
