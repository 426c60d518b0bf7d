package browser

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	redis   string // the gateway's Redis (URL)
	gateway string // base URL
	console string // the gateway's operators' listener (base URL): the console /admin/ and its API
	paysim  string
	// the stack's operator: the console's sign-in, and a session token
	opName, opPassword, opToken string
}

func newStack(t *testing.T) *browserStack {
	t.Helper()
	return newStackOf(t, "")
}

// newStackOf is newStack with the core paying through provider's adapter
// against the simulator's dialect of it (stack.Options.Provider).
func newStackOf(t *testing.T, provider string) *browserStack {
	t.Helper()
	redis := servicetest.Env(t, "REDIS_URL")
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "browser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	apps, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), DatabaseURL: dbURL, RedisURL: redis, AdminToken: "browser-admin-token-of-32-bytes-or-more",
		PaysimEnv:  []string{`ONSALE_PAYSIM_BEHAVIOUR={"upi_delay_min":"1h","upi_delay_max":"1h"}`},
		CoreEnv:    []string{"ONSALE_LOG_LEVEL=warn"},
		GatewayEnv: []string{"ONSALE_LOG_LEVEL=warn", "ONSALE_IP_RATE=1000", "ONSALE_TOKEN_RATE=100"}, Provider: provider})
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
	return &browserStack{db: db, dbURL: dbURL, redis: redis, gateway: apps.GatewayURL, console: apps.GatewayAdminURL, paysim: apps.PaysimURL,
		opName: apps.OperatorName, opPassword: apps.OperatorPassword, opToken: apps.OperatorToken}
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
func browser(t testing.TB) context.Context {
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
		chromedp.WindowSize(1280, 800)}
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
			// What the page said, for a run whose screenshots are gone
			// (CI keeps only the log).
			page, _ := chromedp.Run(c, chromedp.Evaluate[string](`(document.body ? document.body.innerText : "").replace(/\s+/g, " ").slice(0, 2000)`))
			t.Fatalf("timed out waiting for %s (%s; last error %v); the page read: %s", what, js, err, page)
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

// dial PATCHes an event's gateway dials through the admin API. The admin
// routes make the room learn the event themselves, so no fan's place is
// taken for it (a phantom in line would sit ahead of the test's fans).
func (s *browserStack) dial(t *testing.T, ev int64, body string) {
	t.Helper()
	req, _ := http.NewRequest("PATCH", fmt.Sprintf("%s/admin/v1/events/%d", s.console, ev), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.opToken)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PATCH %s: %v", body, err)
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("PATCH %s = %d %s", body, r.StatusCode, b)
	}
}

// sms is every text the paysim's SMS sink holds for phone, oldest first.
func (s *browserStack) sms(t *testing.T, phone string) []string {
	t.Helper()
	r, err := http.Get(s.paysim + "/sms?to=" + url.QueryEscape(phone))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var out struct {
		Messages []struct {
			Body string `json:"body"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&out); err != nil {
		t.Fatalf("GET /sms: %v", err)
	}
	var texts []string
	for _, m := range out.Messages {
		texts = append(texts, m.Body)
	}
	return texts
}

// awaitSMS waits for a text to phone beyond the first `after` that matches
// re, and returns re's first group (or the whole match).
func (s *browserStack) awaitSMS(t *testing.T, phone string, after int, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		texts := s.sms(t, phone)
		for i := len(texts) - 1; i >= after && i >= 0; i-- {
			if m := re.FindStringSubmatch(texts[i]); m != nil {
				return m[len(m)-1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SMS to %s matching %s (have %q)", phone, re, texts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var (
	codeText = regexp.MustCompile(`\b(\d{6})\b`)
	linkText = regexp.MustCompile(`(https?://\S+/tickets/\d+#[A-Za-z0-9._~-]+)`)
)

// signIn signs the page's sign-in form in with phone and the code the
// SMS sink received.
func (s *browserStack) signIn(t *testing.T, c context.Context, phone string) {
	t.Helper()
	until(t, c, "the sign-in form", `!!document.getElementById("signin-phone") && !document.getElementById("signin-phone").closest("form").hidden`, 15*time.Second)
	before := len(s.sms(t, phone))
	if err := chromedp.Do(c, chromedp.SendKeys(chromedp.ID("signin-phone"), phone), chromedp.Click(chromedp.ID("signin-send"))); err != nil {
		t.Fatal(err)
	}
	// A second code for the same phone within the resend window (30 s) is
	// refused: the page offers to enter the earlier one (used already
	// here), so ask again once the window is over, as a fan would.
	for attempt := 0; ; attempt++ {
		until(t, c, "the code form", `!document.getElementById("signin-code").closest("form").hidden`, 10*time.Second)
		if len(s.sms(t, phone)) > before || attempt == 8 {
			break
		}
		time.Sleep(5 * time.Second)
		if err := chromedp.Do(c, chromedp.Click(chromedp.ID("signin-again")), chromedp.Click(chromedp.ID("signin-send"))); err != nil {
			t.Fatal(err)
		}
	}
	code := s.awaitSMS(t, phone, before, codeText)
	if _, err := chromedp.Run(c, chromedp.Evaluate[string](`document.getElementById("signin-code").value = ""`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(c, chromedp.SendKeys(chromedp.ID("signin-code"), code), chromedp.Click(chromedp.ID("signin-verify"))); err != nil {
		t.Fatal(err)
	}
	until(t, c, "the account in localStorage", `!!localStorage.getItem("onsale.account")`, 10*time.Second)
}

//go:embed testdata/axe.min.js
var axeSource string

// axe runs axe-core on the page as it is and fails the test on any serious
// or critical violation.
func axe(t *testing.T, c context.Context, name string) {
	t.Helper()
	if _, err := chromedp.Run(c, chromedp.Evaluate[bool](axeSource+";true")); err != nil {
		t.Fatalf("inject axe: %v", err)
	}
	out, err := chromedp.Run(c, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
  r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + n.failureSummary)}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe %s: %v", name, err)
	}
	if out != "[]" {
		var pretty []any
		json.Unmarshal([]byte(out), &pretty)
		b, _ := json.MarshalIndent(pretty, "", "  ")
		t.Errorf("axe on %s: serious or critical violations:\n%s", name, b)
	}
}

// Viewports the screenshots are taken at.
var (
	desktop = [2]int64{1280, 800}
	phone   = [2]int64{390, 844}
)

func viewport(t *testing.T, c context.Context, size [2]int64) {
	t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if size == phone {
		opts = []chromedp.EmulateViewportOption{chromedp.EmulateScale(2)}
	}
	if err := chromedp.Do(c, chromedp.EmulateViewport(size[0], size[1], opts...)); err != nil {
		t.Fatal(err)
	}
}

// look screenshots the page at the phone and the desktop size and runs axe
// on each, leaving the tab at the desktop size.
func look(t *testing.T, c context.Context, name string) {
	t.Helper()
	for _, v := range []struct {
		size [2]int64
		name string
	}{{phone, "phone"}, {desktop, "desktop"}} {
		viewport(t, c, v.size)
		time.Sleep(150 * time.Millisecond) // a resize listener (the scroll cue) runs
		shot(t, c, name+"-"+v.name)
		axe(t, c, name+" ("+v.name+")")
	}
}
