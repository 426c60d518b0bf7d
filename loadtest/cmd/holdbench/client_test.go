package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// The client speaks HTTP/1.1 to net/http's server: the status
// of each answer, one connection kept alive across posts, a new one after
// the server closes its own.
func TestHoldClient(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/v1/events/7/holds" || r.Header.Get("Authorization") != "Bearer tok":
			w.WriteHeader(http.StatusBadRequest)
		case string(b) == "close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusConflict)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"hold_id":"x"}` + "\n"))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := newHoldClient(srv.URL, "/v1/events/7/holds", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, tc := range []struct {
		body  string
		code  int
		conns int32
	}{
		{`{"seats":["A-1"]}`, 201, 1},
		{`{"seats":["A-2"]}`, 201, 1}, // kept alive
		{"close", 409, 1},
		{`{"seats":["A-3"]}`, 201, 2}, // dialled again
	} {
		code, err := c.post([]byte(tc.body))
		if err != nil || code != tc.code || conns.Load() != tc.conns {
			t.Fatalf("post %d (%s) = %d, %v on %d connections; want %d on %d", i, tc.body, code, err, conns.Load(), tc.code, tc.conns)
		}
	}
}
