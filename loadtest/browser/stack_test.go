package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/servicetest"
)

var ctx = context.Background()

// browserStack is the whole product, as processes: the payment simulator,
// the core and the gateway from bin/ (package stack), on a database of the
// test's own.
type browserStack struct {
	db      *pgxpool.Pool
	dbURL   string
	gateway string // base URL
	paysim  string
	admin   string // admin token
}

func newStack(t *testing.T) *browserStack {
	t.Helper()
	redis := servicetest.Env(t, "REDIS_URL")
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "browser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	apps, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), DatabaseURL: dbURL, RedisURL: redis, AdminToken: "browser-admin",
		PaysimEnv:  []string{`ONSALE_PAYSIM_BEHAVIOUR={"upi_delay_min":"1h","upi_delay_max":"1h"}`},
		CoreEnv:    []string{"ONSALE_LOG_LEVEL=warn"},
		GatewayEnv: []string{"ONSALE_LOG_LEVEL=warn", "ONSALE_IP_RATE=1000", "ONSALE_TOKEN_RATE=100"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apps.Stop() })
	// Redis keys are per event id: start this database's ids somewhere no
	// other test's will be, since every test database starts at 1.
	if err := stack.SpreadEventIDs(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &browserStack{db: db, dbURL: dbURL, gateway: apps.GatewayURL, paysim: apps.PaysimURL, admin: apps.AdminToken}
}

// event seeds the demo catalog (bin/seed, the stadium cut to a few rows)
// and returns one of its cinema shows ("Monsoon Nights", the cinema layout),
// going on sale after onsaleIn, starting in six hours, holds of eight minutes.
func (s *browserStack) event(t *testing.T, onsaleIn time.Duration) int64 {
	t.Helper()
	bin, err := stack.Binary("", "seed")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-database-url", s.dbURL, "-stadium-seats", "100").CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	var id int64
	err = s.db.QueryRow(ctx, `
UPDATE events SET onsale_at = now() + make_interval(secs => $1), starts_at = now() + interval '6 hours', hold_seconds = 480
 WHERE id = (SELECT id FROM events WHERE kind = 'movie' ORDER BY id DESC LIMIT 1)
RETURNING id`, onsaleIn.Seconds()).Scan(&id)
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
