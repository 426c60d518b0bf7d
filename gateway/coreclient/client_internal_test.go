package coreclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway/health"
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

// A flood of uncacheable public reads (every one a new filter, the core
// slow to answer them) fills the public reads' connections and no more:
// the health probe (Ready) and the room's event lookups (Event) still
// answer, so the admission factor and cold rooms' joins do not fall with
// it. The control: with the public reads' fetches on the probe's
// connections (as they were), the same flood leaves the probe no
// connection and it counts the core unavailable.
func TestProbeAnswersUnderAReadFlood(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "own connections", true: "control: shared with the probe"}[shared], func(t *testing.T) {
			inRead, release := make(chan struct{}, 256), make(chan struct{})
			core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/readyz":
					fmt.Fprint(w, `{"status":"ready"}`)
				case "/v1/events/1":
					fmt.Fprint(w, `{"onsale_at":"2030-01-01T00:00:00Z","starts_at":"2030-01-02T00:00:00Z"}`)
				default: // the flood: the catalog by a filter never asked before
					inRead <- struct{}{}
					<-release
					fmt.Fprint(w, `{"events":[]}`)
				}
			}))
			defer core.Close()
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(release) // first: the held reads end
			c := New(core.URL, nil)
			if shared {
				c.cache = c.reads
			}
			for i := range 2 * cacheConns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.Read(context.Background(), fmt.Sprintf("/v1/events?city=c%d", i), "catalog")
				}()
			}
			// As many reads in the core as the probe's pool has connections
			// (the smaller pool): on shared connections, none is left.
			for range readConns {
				<-inRead
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			out := c.Ready(ctx)
			_, evErr := c.Event(ctx, 1)
			if shared {
				if out == health.OK || evErr == nil {
					t.Fatalf("the control: the probe = %v, Event = %v beside a flood on its connections; want both refused (the harness cannot see the starvation)", out, evErr)
				}
				return
			}
			if out != health.OK || evErr != nil {
				t.Fatalf("beside a flood of public reads: the probe = %v, Event = %v; want OK, the event", out, evErr)
			}
		})
	}
}
