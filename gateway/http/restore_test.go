package http_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/storetest"
)

// ruleOff is the store with the restore rule switched off, as the
// failover test's control has it.
type ruleOff struct{ *storetest.Memory }

func (ruleOff) Restore(context.Context, int64, string, gateway.Held) (gateway.RestoreOutcome, int64, error) {
	return gateway.RestoreOff, 0, nil
}

// fan is one fan of these tests: its visitor cookie and its queue token.
type fan struct{ vid, token string }

func (f *fake) join(t *testing.T, who *fan) resp {
	t.Helper()
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	var r resp
	if who.vid == "" {
		r = f.call("POST", path, "")
	} else {
		cookie := "onsale_vid=" + who.vid
		if who.token != "" {
			cookie += fmt.Sprintf("; onsale_q_%d=%s", fakeEvent, who.token)
		}
		r = f.call("POST", path, "", "Cookie", cookie)
	}
	if r.status != 200 {
		t.Fatalf("join = %d %s", r.status, r.raw)
	}
	for _, c := range (&http.Response{Header: http.Header{"Set-Cookie": r.header.Values("Set-Cookie")}}).Cookies() {
		if c.Name == "onsale_vid" {
			who.vid = c.Value
		}
	}
	who.token = r.body["queue_token"].(string)
	return r
}

func (f *fake) poll(t *testing.T, who *fan) resp {
	t.Helper()
	r := f.call("GET", fmt.Sprintf("/v1/events/%d/queue/status", fakeEvent), "", "Authorization", "Bearer "+who.token)
	if tok, ok := r.body["queue_token"].(string); ok && tok != "" {
		who.token = tok
	}
	return r
}

func (f *fake) identity(t *testing.T, who *fan) string {
	t.Helper()
	q, err := f.queue.Verify(who.token, fakeEvent)
	if err != nil {
		t.Fatal(err)
	}
	return q.Identity()
}

// A fan whose join a Redis failover lost polls at its turn: the claim
// finds it unknown, its token puts it back at its place, and it is let in
// (it once stayed at the front, claiming in vain on every poll). The
// control, with the rule off, shows the loss: the fan goes to the back.
func TestStatusRestoresALostJoin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		off     bool
		want    string
		wantPos float64
	}{
		{"restored", false, gateway.StateAdmitted, 2},
		{"control: rule off", true, gateway.StateWaiting, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o fakeOpts
			if tc.off {
				o.wrap = func(m *storetest.Memory) gateway.Store { return ruleOff{m} }
			}
			f := newFakeWith(t, openDials(), o)
			var a, b, c fan
			f.join(t, &a)
			if r := f.join(t, &b); r.body["position"] != 2.0 {
				t.Fatalf("b joined at %v; want 2", r.body["position"])
			}
			f.store.Lose(fakeEvent, f.identity(t, &b))
			if r := f.join(t, &c); r.body["position"] != 2.0 {
				t.Fatalf("c joined after the loss at %v; want 2 (the lost place again)", r.body["position"])
			}
			f.store.Serve(fakeEvent, 2)
			if err := f.room.Refresh(ctx, fakeEvent); err != nil {
				t.Fatal(err)
			}
			for range 3 { // and again: nothing changes on later polls
				r := f.poll(t, &b)
				if r.status != 200 || r.body["state"] != tc.want || r.body["position"] != tc.wantPos {
					t.Fatalf("b's poll at its turn = %d %s; want %s at %v", r.status, r.raw, tc.want, tc.wantPos)
				}
			}
		})
	}
}

// A fan who joins again (a reload) with its token after its join was
// lost finds its place, not a new one at the back; a pre-queue fan whose
// join was lost learns a place at onsale instead of waiting forever.
func TestJoinAndPositionRestore(t *testing.T) {
	f := newFake(t, openDials())
	var a, b fan
	f.join(t, &a)
	f.join(t, &b)
	f.store.Lose(fakeEvent, f.identity(t, &a))
	if r := f.join(t, &a); r.body["position"] != 1.0 {
		t.Fatalf("join again after the loss = %s; want place 1 kept", r.raw)
	}

	d := openDials()
	d.OnsaleAt = time.Now().Add(time.Hour)
	f = newFake(t, d)
	var pre fan
	if r := f.join(t, &pre); r.body["state"] != gateway.StatePrequeue {
		t.Fatalf("join before onsale = %s", r.raw)
	}
	f.store.Lose(fakeEvent, f.identity(t, &pre))
	d.OnsaleAt = time.Now().Add(-time.Second)
	if _, err := f.store.PatchDials(ctx, fakeEvent, d, []string{"onsale_at"}); err != nil {
		t.Fatal(err)
	}
	if err := f.room.Refresh(ctx, fakeEvent); err != nil {
		t.Fatal(err)
	}
	if r := f.poll(t, &pre); r.status != 200 || r.body["state"] != gateway.StateWaiting || r.body["position"] != 1.0 {
		t.Fatalf("pre-queue fan's poll after onsale = %d %s; want waiting at 1", r.status, r.raw)
	}
}
