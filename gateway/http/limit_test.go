package http

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := newLimiter(1, 2, 100)
	now := time.Now()
	if ok, _ := l.allow("a", now); !ok {
		t.Fatal("first request refused")
	}
	l.allow("a", now)
	ok, wait := l.allow("a", now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("third request within the burst of 2: ok=%v wait=%v; want refused with a wait under 1 s", ok, wait)
	}
	if ok, _ := l.allow("b", now); !ok {
		t.Fatal("another key shares a's bucket")
	}
	if ok, _ := l.allow("a", now.Add(1100*time.Millisecond)); !ok {
		t.Fatal("a still refused after the refill")
	}
	for i := range 1000 {
		l.allow(fmt.Sprint(i), now)
	}
	if n := l.size(); n > 100 {
		t.Fatalf("limiter holds %d keys; bounded at 100", n)
	}
	l.allow("late", now.Add(2*time.Minute))
	if n := l.size(); n != 1 {
		t.Fatalf("after a minute idle %d keys remain; want only the new one", n)
	}
}
