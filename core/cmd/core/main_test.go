package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/outbox"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/config"
	"github.com/onsale/onsale/shared/config/configtest"
)

// TestMain runs the real program on :0 with a key file, holds a seat over
// HTTP, then cancels its context (what SIGTERM does) and expects a clean stop.
func TestMainEndToEnd(t *testing.T) {
	dbURL := postgrestest.NewURL(t)
	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "admit.pub")
	if err := admission.WritePublicKeyFile(keyFile, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(context.Background(), dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := db.CreateEvent(context.Background(), seed.EventSpec{Name: "e2e", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(time.Hour), OnsaleAt: time.Now()})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	m := NewMain()
	if err := m.ParseFlags([]string{"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-database-url", dbURL, "-admit-public-key", keyFile, "-sweep-interval", "100ms"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	base := "http://" + m.Addr().String()

	tok, _ := admission.NewSigner(priv).Admit("fan", ev, 0, time.Minute)
	req, _ := http.NewRequest("POST", base+"/v1/events/"+jsonInt(ev)+"/holds", strings.NewReader(`{"best_available":{"band":"RECLINER","count":2}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var h core.Hold
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 201 || len(h.Seats) != 2 {
		t.Fatalf("hold = %d %+v", resp.StatusCode, h)
	}
	// /metrics on the operators' listener only (ONSALE_CORE_ADMIN_ADDR).
	resp, err = http.Get("http://" + m.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "onsale_core_sweeper_lag_seconds") {
		t.Error("/metrics has no sweeper lag")
	}
	if resp, err = http.Get(base + "/metrics"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != 404 {
		t.Errorf("GET /metrics on the API's address = %d; want 404 (the operators' listener serves it)", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v; want a clean stop", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("core did not stop within 15 s of SIGTERM")
	}
}

func TestParseFlags(t *testing.T) {
	good := []string{"-database-url", "postgres://x", "-admit-public-key", "k", "-admit-jwks-url", ""}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		ok   bool
	}{
		{"no database", []string{"-database-url", "", "-admit-public-key", "k"}, nil, false},
		{"no key", []string{"-database-url", "postgres://x", "-admit-public-key", "", "-admit-jwks-url", ""}, nil, false},
		{"both keys", []string{"-database-url", "postgres://x", "-admit-public-key", "k", "-admit-jwks-url", "http://g"}, nil, false},
		{"jwks over https", []string{"-database-url", "postgres://x", "-admit-public-key", "", "-admit-jwks-url", "https://gw.example/.well-known/jwks.json"}, nil, true},
		{"jwks over http to loopback", []string{"-database-url", "postgres://x", "-admit-public-key", "", "-admit-jwks-url", "http://127.0.0.1:8080/.well-known/jwks.json"}, nil, true},
		{"jwks over http to a remote host", []string{"-database-url", "postgres://x", "-admit-public-key", "", "-admit-jwks-url", "http://gw.example/.well-known/jwks.json"}, nil, false},
		{"smtp tls unknown", append(good, "-smtp-tls", "ssl"), nil, false},
		{"smtp tls off", append(good, "-smtp-tls", "off"), nil, true},
		{"zero sweep", append(good, "-sweep-interval", "0s"), nil, false},
		{"good", good, nil, true},
		{"unparsable duration in the environment", good, map[string]string{"ONSALE_SWEEP_INTERVAL": "30"}, false},
		{"pool size out of range", good, map[string]string{"ONSALE_DB_MAX_CONNS": "0"}, false},
		{"unknown late policy", good, map[string]string{"ONSALE_LATE_POLICY": "keep"}, false},
		{"unknown log level", append(good, "-log-level", "loud"), nil, false},
		{"payments without their secrets", append(good, "-provider-url", "http://p"), nil, false},
		{"stripe without its secrets", append(good, "-provider", "stripe"), nil, false},
		{"stripe test mode", append(good, "-provider", "stripe", "-ticket-key", "t.pem"), map[string]string{"ONSALE_PROVIDER_KEY": "sk_test_1", "ONSALE_WEBHOOK_SECRET": "whsec_1"}, true},
		{"stripe live over plain http", append(good, "-provider", "stripe", "-ticket-key", "t.pem"), map[string]string{"ONSALE_PROVIDER_KEY": "sk_live_1", "ONSALE_WEBHOOK_SECRET": "whsec_1"}, false},
		{"stripe live to a stand-in", append(good, "-provider", "stripe", "-ticket-key", "t.pem", "-public-url", "https://t.example", "-provider-url", "http://127.0.0.1:1"), map[string]string{"ONSALE_PROVIDER_KEY": "sk_live_1", "ONSALE_WEBHOOK_SECRET": "whsec_1"}, false},
		{"stripe live", append(good, "-provider", "stripe", "-ticket-key", "t.pem", "-public-url", "https://t.example"), map[string]string{"ONSALE_PROVIDER_KEY": "sk_live_1", "ONSALE_WEBHOOK_SECRET": "whsec_1"}, true},
		{"razorpay without its key id", append(good, "-provider", "razorpay", "-ticket-key", "t.pem"), map[string]string{"ONSALE_PROVIDER_KEY": "s", "ONSALE_WEBHOOK_SECRET": "w"}, false},
		{"razorpay live over plain http", append(good, "-provider", "razorpay", "-ticket-key", "t.pem", "-provider-key-id", "rzp_live_1"), map[string]string{"ONSALE_PROVIDER_KEY": "s", "ONSALE_WEBHOOK_SECRET": "w"}, false},
		{"a key id for stripe", append(good, "-provider", "stripe", "-ticket-key", "t.pem", "-provider-key-id", "rzp_test_1"), map[string]string{"ONSALE_PROVIDER_KEY": "sk_test_1", "ONSALE_WEBHOOK_SECRET": "whsec_1"}, false},
		{"unknown provider", append(good, "-provider", "paypal"), nil, false},
		{"smtp without a port", append(good, "-smtp-addr", "mail"), nil, false},
		{"public url not a url", append(good, "-public-url", "onsale.in"), nil, false},
		{"public url with a fragment", append(good, "-public-url", "https://onsale.in/#x"), nil, false},
		{"public url https", append(good, "-public-url", "https://tickets.onsale.in"), nil, true},
		{"sends per address out of range", good, map[string]string{"ONSALE_SIGNIN_SENDS_PER_ADDR": "0"}, false},
		{"account token ttl too short", append(good, "-account-token-ttl", "1s"), nil, false},
		{"flag wins over the environment", append(good, "-sweep-interval", "1s"), map[string]string{"ONSALE_SWEEP_INTERVAL": "0s"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := NewMain().ParseFlags(tc.args)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseFlags(%v) with %v = %v; want ok=%v", tc.args, tc.env, err, tc.ok)
			}
		})
	}
}

// The defaults written in the Config tags are the packages' own.
func TestConfigDefaults(t *testing.T) {
	m := NewMain()
	if err := m.ParseFlags([]string{"-database-url", "postgres://x", "-admit-public-key", "k", "-admit-jwks-url", ""}); err != nil {
		t.Fatal(err)
	}
	if m.Config.ExtendBy != core.ExtendBy {
		t.Errorf("default ExtendBy = %v; want core.ExtendBy %v", m.Config.ExtendBy, core.ExtendBy)
	}
	if m.Config.OutboxLease != outbox.DefaultLease {
		t.Errorf("default OutboxLease = %v; want outbox.DefaultLease %v", m.Config.OutboxLease, outbox.DefaultLease)
	}
}

// Item 12 of issue 13: no answer is cut after money moved. The server's
// write timeout outlasts the longest request's work (a card confirmation:
// http.LongestRequest, the sum of its bounded steps), and the default
// grace period of a shutdown lets such a request finish.
func TestTimeoutsOutlastPayment(t *testing.T) {
	hs := newHTTPServer(nil, slog.New(slog.DiscardHandler))
	if hs.WriteTimeout <= corehttp.LongestRequest {
		t.Errorf("WriteTimeout = %v; want above http.LongestRequest %v", hs.WriteTimeout, corehttp.LongestRequest)
	}
	if hs.ReadTimeout > corehttp.ReadTimeout {
		t.Errorf("ReadTimeout = %v; want at most %v, the body read http.LongestRequest counts", hs.ReadTimeout, corehttp.ReadTimeout)
	}
	m := NewMain()
	if err := m.ParseFlags([]string{"-database-url", "postgres://x", "-admit-public-key", "k", "-admit-jwks-url", ""}); err != nil {
		t.Fatal(err)
	}
	if m.Config.ShutdownTimeout < corehttp.LongestRequest {
		t.Errorf("default ShutdownTimeout = %v; want at least http.LongestRequest %v", m.Config.ShutdownTimeout, corehttp.LongestRequest)
	}
}

// docs/configuration.md's table of the core's settings is generated from Config.
func TestConfigDoc(t *testing.T) {
	configtest.CheckDoc(t, "../../../docs/configuration.md", "core", &Config{})
}

// The effective config is logged once at start with every credential
// masked: URLs that may carry a password (the SMS gateway's among them; the
// old code logged only sms=true) show no password.
func TestConfigLogMasksSecrets(t *testing.T) {
	m := NewMain()
	err := m.ParseFlags([]string{
		"-database-url", "postgres://core:dbpass@db/onsale", "-admit-public-key", "k", "-admit-jwks-url", "",
		"-redis", "redis://:redispass@cache:6379/0",
		"-sms-url", "https://acct:smspass@sms.example/send",
		"-smtp-password", "smtppass", "-provider-key", "providerkey", "-webhook-secret", "hooksecret",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	config.Log(slog.New(slog.NewTextHandler(&out, nil)), &m.Config)
	for _, secret := range []string{"dbpass", "redispass", "smspass", "smtppass", "providerkey", "hooksecret"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("config log shows %q:\n%s", secret, out.String())
		}
	}
	if !strings.Contains(out.String(), "sms.example") {
		t.Errorf("config log lacks the SMS host (only the password is masked):\n%s", out.String())
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestMainJWKS starts the core with the gateway's JWKS URL instead of a key
// file: a token from a published key is accepted; once the key is withdrawn
// from the set, the next refresh makes the core refuse it.
func TestMainJWKS(t *testing.T) {
	dbURL := postgrestest.NewURL(t)
	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer := admission.NewSigner(priv)
	other, _ := admission.GenerateKey()
	var mu sync.Mutex
	published := []ed25519.PublicKey{signer.PublicKey()}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(admission.NewJWKS(published...))
	}))
	defer jwks.Close()

	m := NewMain()
	if err := m.ParseFlags([]string{"-addr", "127.0.0.1:0", "-database-url", dbURL, "-admit-public-key", "",
		"-admit-jwks-url", jwks.URL, "-jwks-refresh", "50ms"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := "http://" + m.Addr().String()

	tok, _ := signer.Admit("fan", 1, 0, time.Minute)
	status := func() int {
		req, _ := http.NewRequest("GET", base+"/v1/holds/00000000-0000-4000-8000-000000000000", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// A valid token gets past authentication to the lookup: 404, not 401.
	if got := status(); got != http.StatusNotFound {
		t.Fatalf("with the key published: %d; want 404 (authenticated, no such hold)", got)
	}
	mu.Lock()
	published = []ed25519.PublicKey{other.Public().(ed25519.PublicKey)}
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for status() != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the core still accepts a token whose key left the JWKS")
		}
		time.Sleep(50 * time.Millisecond) // poll interval: the loop waits on the refusal itself
	}
}

// The core publishes its signing key (ONSALE_SIGNING_KEY) as JWKS, and its
// sign-in works without an SMS gateway only with the development flag.
func TestMainSigningKey(t *testing.T) {
	dbURL := postgrestest.NewURL(t)
	dir := t.TempDir()
	admitKey, _ := admission.GenerateKey()
	admitPub := filepath.Join(dir, "admit.pub")
	signing, _ := admission.GenerateKey()
	signingFile := filepath.Join(dir, "signing.key")
	if err := admission.WritePublicKeyFile(admitPub, admitKey.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	if err := admission.WritePrivateKeyFile(signingFile, signing); err != nil {
		t.Fatal(err)
	}
	m := NewMain()
	if err := m.ParseFlags([]string{"-addr", "127.0.0.1:0", "-database-url", dbURL, "-admit-public-key", admitPub,
		"-signing-key", signingFile, "-dev-log-codes"}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	m.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := "http://" + m.Addr().String()

	resp, err := http.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	keys, err := admission.ParseJWKS(b)
	if err != nil || len(keys) != 1 || keys[admission.KeyID(signing.Public().(ed25519.PublicKey))] == nil {
		t.Fatalf("jwks = %s, %v; want the signing key", b, err)
	}
	resp, err = http.Post(base+"/v1/auth/code", "application/json", strings.NewReader(`{"phone":"9812345678"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(logs.String(), `"code":"`) {
		t.Fatalf("sign-in code with -dev-log-codes = %d; logged: %v", resp.StatusCode, strings.Contains(logs.String(), `"code":"`))
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
