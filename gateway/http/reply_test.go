package http

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The hand-written reply is byte for byte what json.Marshal writes, for
// every field set or not, and falls back to it for strings JSON escapes.
// The control: a reply with such a string is not written by hand.
func TestQueueReplyJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 5, 30, 0, 123456789, time.FixedZone("x", 5*3600+1800))
	utc := time.Unix(1767225600, 0).UTC()
	replies := []queueReply{
		{State: "waiting", Position: 14022, Ahead: 14021, EtaSeconds: 8413, BoundBy: "rate", PollAfterMs: 29114},
		{State: "waiting", Ahead: 0, EtaSeconds: -1, PollAfterMs: 1000},
		{State: "prequeue", OnsaleAt: &at, PollAfterMs: 30000},
		{State: "admitted", QueueToken: "a.b.c", Position: 3, AdmitToken: "x.y.z", AdmitExpiresAt: &utc, PollAfterMs: 30000},
		{State: "waiting", Position: math.MaxInt64, Ahead: math.MinInt64, Message: "your turn came and went unclaimed: you are back in line"},
		{},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		q := queueReply{State: "paused", Position: r.Int64() - r.Int64(), Ahead: r.Int64N(1e6), EtaSeconds: r.Int64N(1e5) - 1,
			PollAfterMs: r.Int64N(60000)}
		if r.IntN(2) == 0 {
			q.BoundBy = "core_health"
		}
		if r.IntN(2) == 0 {
			d := time.Unix(r.Int64N(1e10), r.Int64N(1e9))
			q.OnsaleAt = &d
		}
		replies = append(replies, q)
	}
	for _, q := range replies {
		want, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendReply(nil, &q)
		if !ok || string(got) != string(want) {
			t.Fatalf("appendReply(%+v) = %s, %v; json.Marshal writes %s", q, got, ok, want)
		}
	}
	for _, m := range []string{`a "quote"`, `<b>`, "a\nb", "caf\u00e9", `back\slash`, "&"} {
		if _, ok := appendReply(nil, &queueReply{State: "waiting", Message: m}); ok {
			t.Errorf("appendReply wrote %q by hand; json.Marshal escapes it", m)
		}
	}
}

func TestQueueReplyAllocs(t *testing.T) {
	q := queueReply{State: "waiting", Position: 14022, Ahead: 14021, EtaSeconds: 8413, BoundBy: "rate", PollAfterMs: 29114}
	var buf [512]byte
	if n := testing.AllocsPerRun(100, func() { appendReply(buf[:0], &q) }); n != 0 {
		t.Fatalf("appendReply allocates %v times; want none", n)
	}
}
