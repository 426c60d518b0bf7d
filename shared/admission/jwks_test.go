package admission

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckJWKSURL(t *testing.T) {
	for in, ok := range map[string]bool{
		"https://gw.example/.well-known/jwks.json":    true,
		"http://127.0.0.1:8080/.well-known/jwks.json": true,
		"http://[::1]:8080/jwks":                      true,
		"http://localhost:8080/jwks":                  true,
		"http://10.0.0.10/.well-known/jwks.json":      false,
		"http://gw.example/.well-known/jwks.json":     false,
		"ftp://gw.example/jwks":                       false,
		"/jwks":                                       false,
	} {
		if err := CheckJWKSURL(in); (err == nil) != ok {
			t.Errorf("CheckJWKSURL(%q) = %v; want ok %v", in, err, ok)
		}
	}
}

// A JWKS server that accepts the request and never answers: the fetch
// ends with an error (JWKSTimeout), even with a client that has no
// timeout of its own and a context without a deadline. The wait for it
// is a bound on a hang, not a measurement.
func TestFetchJWKSBounded(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	done := make(chan error, 1)
	go func() {
		_, err := FetchJWKS(context.Background(), &http.Client{}, srv.URL)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("FetchJWKS of a server that never answers succeeded")
		}
	case <-time.After(10 * JWKSTimeout):
		t.Fatal("FetchJWKS of a server that never answers has not returned: the refresh would hang forever")
	}
}

// keyRecorder is a KeySet that records every set it is given.
type keyRecorder struct {
	mu   sync.Mutex
	keys map[string]ed25519.PublicKey
	sets []map[string]ed25519.PublicKey
}

func (r *keyRecorder) Keys() map[string]ed25519.PublicKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys
}

func (r *keyRecorder) SetKeys(k map[string]ed25519.PublicKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = k
	r.sets = append(r.sets, k)
}

// Two cores behind a load balancer, mid-rotation: one serves {old, new},
// the other {new}, answering reads in turn. The refresher keeps trusting
// the old key through all of it (a replacing refresher drops it on every
// other read: the control is that half the reads lacked it); once every
// core serves only the new key, the old one is retired after RetireAfter
// reads without it.
func TestRefreshJWKSMergesDuringRotation(t *testing.T) {
	oldPub, _, _ := ed25519.GenerateKey(nil)
	newPub, _, _ := ed25519.GenerateKey(nil)
	oldKid, newKid := KeyID(oldPub), KeyID(newPub)
	both, _ := json.Marshal(NewJWKS(oldPub, newPub))
	onlyNew, _ := json.Marshal(NewJWKS(newPub))
	var reads, lacking atomic.Int64
	var rotated atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := reads.Add(1)
		if rotated.Load() || n%2 == 0 {
			lacking.Add(1)
			w.Write(onlyNew)
			return
		}
		w.Write(both)
	}))
	defer srv.Close()

	rec := &keyRecorder{keys: map[string]ed25519.PublicKey{oldKid: oldPub}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		RefreshJWKS(ctx, rec, srv.Client(), srv.URL, time.Millisecond, nil)
	}()
	waitReads := func(n int64) {
		t.Helper()
		for reads.Load() < n {
			time.Sleep(time.Millisecond)
		}
	}
	waitReads(4 * RetireAfter)
	rec.mu.Lock()
	for i, s := range rec.sets {
		if _, ok := s[oldKid]; !ok {
			t.Errorf("set %d of %d lacks the old key mid-rotation: %d keys", i, len(rec.sets), len(s))
		}
		if _, ok := s[newKid]; !ok {
			t.Errorf("set %d lacks the new key", i)
		}
	}
	rec.mu.Unlock()
	if lacking.Load() < RetireAfter {
		t.Fatalf("only %d reads lacked the old key: the test did not rotate", lacking.Load())
	}

	rotated.Store(true)
	from := reads.Load()
	waitReads(from + RetireAfter + 2)
	cancel()
	<-done
	if _, ok := rec.Keys()[oldKid]; ok {
		t.Errorf("the old key is still trusted after %d reads without it", reads.Load()-from)
	}
	if _, ok := rec.Keys()[newKid]; !ok {
		t.Error("the new key is not trusted")
	}
}
