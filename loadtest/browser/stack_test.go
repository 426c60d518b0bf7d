package browser

import (
	"context"
	"crypto/ed25519"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/servicetest"
)

var ctx = context.Background()

// stack is the whole product, as processes.
type stack struct {
	db      *postgres.DB
	gateway string // base URL
	paysim  string
	admin   string // admin token
	dir     string
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func build(t *testing.T, dir string, pkgs ...string) {
	t.Helper()
	args := append([]string{"build", "-o", dir + "/"}, pkgs...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

func start(t *testing.T, dir, name string, env []string, args ...string) {
	t.Helper()
	logf, _ := os.Create(filepath.Join(dir, name+".log"))
	cmd := exec.Command(filepath.Join(dir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait(); logf.Close() })
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := http.Get(url)
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer", url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newStack(t *testing.T) *stack {
	t.Helper()
	redis := servicetest.Env(t, "REDIS_URL")
	dir := t.TempDir()
	build(t, dir, "github.com/onsale/onsale/core/cmd/core", "github.com/onsale/onsale/gateway/cmd/gateway", "github.com/onsale/onsale/loadtest/cmd/paysim")
	dbURL := postgrestest.NewURL(t)
	db, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	// Redis keys are per event id: start this database's ids somewhere no
	// other test's will be, since every test database starts at 1.
	if _, err := db.Pool().Exec(ctx, `SELECT setval('events_id_seq', $1)`, 1_000_000+rand.Int64N(1<<40)); err != nil {
		t.Fatal(err)
	}
	akey, _ := admission.GenerateKey()
	tkey, _ := admission.GenerateKey()
	admission.WritePrivateKeyFile(filepath.Join(dir, "admit.key"), akey)
	admission.WritePublicKeyFile(filepath.Join(dir, "admit.pub"), akey.Public().(ed25519.PublicKey))
	admission.WritePrivateKeyFile(filepath.Join(dir, "ticket.key"), tkey)
	coreAddr, gwAddr, simAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	s := &stack{db: db, gateway: "http://" + gwAddr, paysim: "http://" + simAddr, admin: "browser-admin", dir: dir}
	start(t, dir, "paysim", []string{"ONSALE_PAYSIM_ADDR=" + simAddr, "ONSALE_PAYSIM_CONTROL=true",
		"ONSALE_PAYSIM_WEBHOOK_URL=http://" + coreAddr + "/v1/webhooks/payments", "ONSALE_PAYSIM_BEHAVIOUR={\"upi_delay_min\":\"1h\",\"upi_delay_max\":\"1h\"}"})
	start(t, dir, "core", []string{"DATABASE_URL=" + dbURL, "ONSALE_CORE_ADDR=" + coreAddr, "ONSALE_REDIS=" + redis,
		"ONSALE_ADMIT_PUBLIC_KEY=" + filepath.Join(dir, "admit.pub"), "ONSALE_ADMIT_JWKS_URL=",
		"ONSALE_PROVIDER_URL=http://" + simAddr, "ONSALE_PROVIDER_KEY=sk_test_paysim", "ONSALE_WEBHOOK_SECRET=whsec_test_paysim",
		"ONSALE_TICKET_KEY=" + filepath.Join(dir, "ticket.key"), "ONSALE_SMS_URL=http://" + simAddr + "/sms", "ONSALE_LOG_LEVEL=warn"})
	start(t, dir, "gateway", []string{"ONSALE_GATEWAY_ADDR=" + gwAddr, "ONSALE_REDIS=" + redis, "ONSALE_CORE_URL=http://" + coreAddr,
		"ONSALE_ADMIT_KEYS=" + filepath.Join(dir, "admit.key"), "ONSALE_QUEUE_SECRET=" + strings.Repeat("b", 32),
		"ONSALE_ADMIN_TOKEN=" + s.admin, "ONSALE_CHECKOUT_URL=http://" + simAddr + "/checkout", "ONSALE_LOG_LEVEL=warn",
		"ONSALE_IP_RATE=1000", "ONSALE_TOKEN_RATE=100"})
	waitHTTP(t, s.paysim+"/healthz")
	waitHTTP(t, "http://"+coreAddr+"/readyz")
	waitHTTP(t, s.gateway+"/healthz")
	return s
}

// event creates a cinema show going on sale after onsaleIn.
func (s *stack) event(t *testing.T, onsaleIn time.Duration) int64 {
	t.Helper()
	id, err := s.db.CreateEvent(ctx, seed.EventSpec{Name: "Monsoon Nights", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(6 * time.Hour), OnsaleAt: time.Now().Add(onsaleIn)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// browser starts headless Chromium (flags from the workplace's measured
// notes) and returns the browser's context; tabs are made from it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		servicetest.Missing(t, "chromium is not installed (make test installs it)")
	}
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900)}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil { // starts the browser, with no timeout on this first call
		t.Fatal(err)
	}
	return bctx
}

// tab opens an isolated fan (own cookies and storage).
func tab(t *testing.T, b context.Context) context.Context {
	c, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	return c
}

// until evaluates a JavaScript condition every 100 ms until it is true.
func until(t *testing.T, c context.Context, what, js string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			shot(t, c, "timeout-"+strings.ReplaceAll(what, " ", "-"))
			t.Fatalf("timed out waiting for %s (%s; last error %v)", what, js, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shot saves a full-page screenshot in the test's output directory.
func shot(t *testing.T, c context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100)) // 100: PNG (lower is JPEG)
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := os.Getenv("ONSALE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "onsale-screenshots")
	}
	os.MkdirAll(dir, 0o755)
	f := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".png")
	os.WriteFile(f, png, 0o644)
	t.Logf("screenshot %s", f)
}
