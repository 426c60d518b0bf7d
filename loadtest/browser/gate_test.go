package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base32"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/servicetest"
)

// The gate scanner in Chromium, its camera fed a video of real tickets:
// a booking of the test's stack, its QR codes as the core draws them.
// Online, a ticket is admitted once and refused the second time it comes
// into view. Offline (the network cut in the browser), a scanner admits
// a fresh ticket on its signature, says OFFLINE, keeps the scan, and when
// the network is back syncs it and reports that another gate had let the
// same ticket in.
func TestGateScanner(t *testing.T) {
	redis := servicetest.Env(t, "REDIS_URL")
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "gate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	apps, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), DatabaseURL: dbURL, RedisURL: redis,
		CoreEnv: []string{"ONSALE_LOG_LEVEL=warn"}, GatewayEnv: []string{"ONSALE_LOG_LEVEL=warn"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apps.Stop() })
	s := &browserStack{dbURL: dbURL, gateway: apps.GatewayURL}
	if s.db, err = pgxpool.New(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.db.Close)
	ev := s.event(t, -time.Minute)
	// The show starts now: it is one of the gate's events of the day.
	var venue int64
	if err := s.db.QueryRow(ctx, `UPDATE events SET starts_at = now() WHERE id = $1 RETURNING venue_id`, ev).Scan(&venue); err != nil {
		t.Fatal(err)
	}
	const account = "acct:gate-test"
	booking := confirmedBooking(t, s, ev, account, "AUD-C-7", "AUD-C-8", "AUD-C-9")
	admit, err := admitToken(apps.AdmitKey, account, ev)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := ticketQR(t, apps.CoreURL, admit, booking, 1), ticketQR(t, apps.CoreURL, admit, booking, 2), ticketQR(t, apps.CoreURL, admit, booking, 3)
	refA, refB, refC := fmt.Sprintf("%d-1", booking), fmt.Sprintf("%d-2", booking), fmt.Sprintf("%d-3", booking)

	t.Run("online: admitted once, refused the second time", func(t *testing.T) {
		// Two seconds of ticket A, four seconds of nothing, again and again.
		video := writeY4M(t, []clip{{a, 10}, {nil, 20}})
		scanner := gateBrowser(t, video)
		token := staffToken(t, apps.SigningKey, venue, "1", "asha")
		if err := chromedp.Do(scanner, chromedp.Navigate(s.gateway+"/gate#"+token)); err != nil {
			t.Fatal(err)
		}
		until(t, scanner, "ticket A admitted", logHas("ADMITTED", refA), 20*time.Second)
		bothSizes(t, scanner, "admitted")
		until(t, scanner, "ticket A refused when it comes back", logHas("ALREADY USED", refA), 20*time.Second)
		bothSizes(t, scanner, "already-used")
		text, _ := chromedp.Run(scanner, chromedp.Evaluate[string](`document.getElementById("result-detail").textContent`))
		if !strings.Contains(text, "at gate 1 at ") {
			t.Errorf("the refusal says %q; want the gate and time of the first scan", text)
		}
		var n int
		s.db.QueryRow(ctx, `SELECT count(*) FROM checkins WHERE booking_id = $1 AND n = 1`, booking).Scan(&n)
		admitted, _ := chromedp.Run(scanner, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('#log li[data-result="ADMITTED"][data-ticket="%s"]').length`, refA)))
		if n != 1 || admitted != 1 {
			t.Fatalf("ticket A: %d check-ins, %d admitted answers; want 1 and 1", n, admitted)
		}
	})

	t.Run("offline: signature check, then sync reports the duplicate", func(t *testing.T) {
		// Four seconds of nothing (time to cut the network), then ticket C.
		video := writeY4M(t, []clip{{nil, 20}, {c, 10}, {nil, 5}})
		scanner := gateBrowser(t, video)
		token := staffToken(t, apps.SigningKey, venue, "2", "ravi")
		if err := chromedp.Do(scanner, chromedp.Navigate(s.gateway+"/gate#"+token)); err != nil {
			t.Fatal(err)
		}
		until(t, scanner, "the offline pack", `!!(window.gate && window.gate.pack && window.gate.key)`, 10*time.Second)
		setOffline(t, scanner, true)
		until(t, scanner, "ticket C admitted offline", logHas("ADMITTED", refC)+` && document.getElementById("net").textContent === "OFFLINE"`, 20*time.Second)
		bothSizes(t, scanner, "offline-admitted")
		until(t, scanner, "ticket C refused offline when it comes back", logHas("ALREADY USED", refC), 20*time.Second)
		bothSizes(t, scanner, "offline-already-used")
		// One look, one answer: ticket C was in view twice, so two answers.
		answers, _ := chromedp.Run(scanner, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('#log li[data-ticket="%s"]').length`, refC)))
		if answers != 2 {
			t.Errorf("%d answers for ticket C after it was shown twice; want 2", answers)
		}
		// Typed codes offline: an old "t1." ticket is sent to be checked
		// online (amber); a T2 code of the right shape but with stray bits
		// past its last byte is not read as a ticket at all.
		enc := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(append([]byte{1, 1, 1}, make([]byte, 64)...))
		stray := "T2." + enc[:len(enc)-1] + "B" // the last character's 4 pad bits not zero
		for _, tc := range []struct{ code, result, detail string }{
			{"t1.eyJ2IjoxfQ.c2ln", "OLD TICKET", "check online"},
			{stray, "NOT VALID", "Not an onsale ticket"},
		} {
			if _, err := chromedp.Run(scanner, chromedp.Evaluate[bool](fmt.Sprintf(
				`document.getElementById("manual-code").value = %q; document.getElementById("manual").requestSubmit(); true`, tc.code))); err != nil {
				t.Fatal(err)
			}
			until(t, scanner, tc.result+": "+tc.detail, fmt.Sprintf(`[...document.querySelectorAll('#log li[data-result="%s"]')].some((li) => li.textContent.includes(%q))`,
				tc.result, tc.detail), 5*time.Second)
		}
		// Meanwhile gate 9, online, had let a copy of ticket C in.
		if _, err := s.db.Exec(ctx, `INSERT INTO checkins (booking_id, n, ticket_id, event_id, gate, staff, scanned_at)
SELECT booking_id, n, id, event_id, '9', 'staff:meera', now() - interval '1 minute' FROM tickets WHERE booking_id = $1 AND n = 3`, booking); err != nil {
			t.Fatal(err)
		}
		setOffline(t, scanner, false)
		until(t, scanner, "the sync report", `!document.getElementById("sync").hidden && document.getElementById("net").textContent === "ONLINE"`, 20*time.Second)
		report, _ := chromedp.Run(scanner, chromedp.Evaluate[string](`document.getElementById("sync").textContent`))
		if !strings.Contains(report, "1 duplicate") || !strings.Contains(report, refC+" was let in twice: first at gate 9") {
			t.Errorf("sync report = %q; want ticket %s reported as a duplicate first used at gate 9", report, refC)
		}
		bothSizes(t, scanner, "synced-duplicate")
		pending, _ := chromedp.Run(scanner, chromedp.Evaluate[string](`localStorage.getItem(window.gate.storageKey("pending"))`))
		if pending != "[]" {
			t.Errorf("scans still pending after the sync: %s", pending)
		}
	})

	t.Run("sign-out offline keeps the scans for their steward, never sent with another token", func(t *testing.T) {
		// Four seconds of nothing, ticket B, then a minute of nothing.
		video := writeY4M(t, []clip{{nil, 20}, {b, 10}, {nil, 300}})
		scanner := gateBrowser(t, video)
		if err := chromedp.Do(scanner, chromedp.Navigate(s.gateway+"/gate#"+staffToken(t, apps.SigningKey, venue, "4", "lata"))); err != nil {
			t.Fatal(err)
		}
		until(t, scanner, "the offline pack", `!!(window.gate && window.gate.pack && window.gate.key)`, 10*time.Second)
		setOffline(t, scanner, true)
		until(t, scanner, "ticket B admitted offline", logHas("ADMITTED", refB), 20*time.Second)
		lataKey, _ := chromedp.Run(scanner, chromedp.Evaluate[string](`window.gate.storageKey("pending")`))
		if _, err := chromedp.Run(scanner, chromedp.Evaluate[bool](`document.getElementById("signout").click(); true`)); err != nil {
			t.Fatal(err)
		}
		until(t, scanner, "the sign-out note", `document.getElementById("signin-error").textContent.includes("1 offline scan of lata at gate 4 stay")`, 5*time.Second)
		setOffline(t, scanner, false)
		gateSignIn(t, scanner, staffToken(t, apps.SigningKey, venue, "5", "kiran"))
		until(t, scanner, "kiran online", `!!(window.gate.pack && window.gate.staff.name === "kiran") && document.getElementById("net").textContent === "ONLINE"`, 10*time.Second)
		time.Sleep(6 * time.Second) // past a probe: kiran's scanner syncs only kiran's scans
		// (The fake camera restarts its video for kiran, who may scan B
		// online himself: what must not happen is lata's scan sent.)
		var n int
		s.db.QueryRow(ctx, `SELECT count(*) FROM checkins WHERE booking_id = $1 AND n = 2 AND (gate = '4' OR offline)`, booking).Scan(&n)
		left, _ := chromedp.Run(scanner, chromedp.Evaluate[int](fmt.Sprintf(`JSON.parse(localStorage.getItem(%q)).length`, lataKey)))
		if n != 0 || left != 1 {
			t.Fatalf("after kiran signed in: %d check-ins of ticket B from lata's offline scan, %d of lata's scans kept; want 0 and 1", n, left)
		}
		bothSizes(t, scanner, "signed-out-kept")
	})

	// Last: it stops the gateway.
	t.Run("reload with the gateway down: the service worker keeps the scanner", func(t *testing.T) {
		scanner := gateBrowser(t, writeY4M(t, []clip{{nil, 20}}))
		if err := chromedp.Do(scanner, chromedp.Navigate(s.gateway+"/gate#"+staffToken(t, apps.SigningKey, venue, "6", "noor"))); err != nil {
			t.Fatal(err)
		}
		until(t, scanner, "the offline pack and the service worker", `!!(window.gate && window.gate.pack && window.gate.key && navigator.serviceWorker.controller)`, 15*time.Second)
		if err := apps.Gateway.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(scanner, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		until(t, scanner, "the scanner after the reload, offline, with its pack", `!!(window.gate && window.gate.pack && window.gate.key) && !document.getElementById("scanner").hidden && document.getElementById("net").textContent === "OFFLINE"`, 20*time.Second)
		bothSizes(t, scanner, "reloaded-offline")
	})
}

// gateSignIn signs the scanner in with a staff token through the form.
func gateSignIn(t *testing.T, scanner context.Context, token string) {
	t.Helper()
	if _, err := chromedp.Run(scanner, chromedp.Evaluate[bool](fmt.Sprintf(
		`document.getElementById("token").value = %q; document.getElementById("signin-form").requestSubmit(); true`, token))); err != nil {
		t.Fatal(err)
	}
}

// logHas is a condition: the scanner's log has an answer for a ticket.
func logHas(result, ref string) string {
	return fmt.Sprintf(`!!document.querySelector('#log li[data-result="%s"][data-ticket="%s"]')`, result, ref)
}

// confirmedBooking books seats directly (a CONFIRMED, captured UPI
// booking with its tickets, as a settled payment leaves it).
func confirmedBooking(t *testing.T, s *browserStack, ev int64, account string, seats ...string) int64 {
	t.Helper()
	var id int64
	err := s.db.QueryRow(ctx, `
INSERT INTO bookings (hold_id, event_id, account, seat_ids, quantity, amount_paise, flow, status, confirmed_at, captured_at)
VALUES (gen_random_uuid(), $1, $2, $3, cardinality($3::text[]), 100, 'async', 'CONFIRMED', now(), now()) RETURNING id`, ev, account, seats).Scan(&id)
	if err == nil {
		_, err = s.db.Exec(ctx, `UPDATE seats SET status = 'BOOKED', booking_id = $3 WHERE event_id = $1 AND seat_id = ANY($2)`, ev, seats, id)
	}
	if err == nil {
		_, err = s.db.Exec(ctx, `INSERT INTO tickets (booking_id, event_id, seat_id, n) SELECT $1, $2, s, i FROM unnest($3::text[]) WITH ORDINALITY AS u(s, i)`, id, ev, seats)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func admitToken(keyFile, account string, ev int64) (string, error) {
	key, err := admission.ReadPrivateKeyFile(keyFile)
	if err != nil {
		return "", err
	}
	return admission.NewSigner(key).Admit(account, ev, 0, 10*time.Minute)
}

// ticketQR fetches a ticket's QR code as the core draws it for the fan.
func ticketQR(t *testing.T, core, admit string, booking int64, n int) image.Image {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/bookings/%d/tickets/%d/qr.png", core, booking, n), nil)
	req.Header.Set("Authorization", "Bearer "+admit)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("QR of ticket %d: %d %s", n, resp.StatusCode, body)
	}
	img, err := png.Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if w := img.Bounds().Dx(); w < 512 {
		t.Errorf("the ticket QR is %d px; want at least 512", w)
	}
	return img
}

func staffToken(t *testing.T, signingKey string, venue int64, gate, name string) string {
	t.Helper()
	bin, err := stack.Binary("", "stafftoken")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-signing-key", signingKey, "-venue", fmt.Sprint(venue), "-gate", gate, "-name", name, "-ttl", "1h").Output()
	if err != nil {
		t.Fatalf("stafftoken: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// clip is a stretch of the fake camera's video: a QR image (nil: an empty
// grey wall) for some frames at 5 frames a second.
type clip struct {
	qr     image.Image
	frames int
}

// writeY4M writes the clips as a 640x480 YUV 4:2:0 video (the format
// Chromium's fake camera reads, and loops). A QR image is drawn in the
// middle at 360 px, as a phone held at arm's length shows a ticket.
func writeY4M(t *testing.T, clips []clip) string {
	t.Helper()
	const w, h, side = 640, 480, 360
	path := filepath.Join(t.TempDir(), "camera.y4m")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	fmt.Fprintf(bw, "YUV4MPEG2 W%d H%d F5:1 Ip A1:1 C420jpeg\n", w, h)
	chroma := bytes.Repeat([]byte{128}, w*h/2)
	for _, c := range clips {
		luma := bytes.Repeat([]byte{150}, w*h) // a grey wall
		if c.qr != nil {
			b := c.qr.Bounds()
			x0, y0 := (w-side)/2, (h-side)/2
			for y := range side {
				for x := range side {
					r, _, _, _ := c.qr.At(b.Min.X+x*b.Dx()/side, b.Min.Y+y*b.Dy()/side).RGBA()
					luma[(y0+y)*w+x0+x] = byte(20 + (r>>8)*215/255) // print-like: not pure black and white
				}
			}
		}
		for range c.frames {
			bw.WriteString("FRAME\n")
			bw.Write(luma)
			bw.Write(chroma)
		}
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

// gateBrowser starts Chromium whose camera plays video, and returns a tab.
func gateBrowser(t *testing.T, video string) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		servicetest.Missing(t, "chromium is not installed (make test installs it)")
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("use-fake-device-for-media-stream", true), chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-file-for-fake-video-capture", video),
		chromedp.WindowSize(1280, 800)}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatal(err)
	}
	return bctx
}

// setOffline cuts the tab's network (every request fails) or restores it.
func setOffline(t *testing.T, c context.Context, offline bool) {
	t.Helper()
	err := chromedp.Do(c, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: offline, DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
			MatchedNetworkConditions: []*network.Conditions{{Offline: offline, DownloadThroughput: -1, UploadThroughput: -1}}})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
}

// bothSizes saves the page at desktop (1280x800) and phone (390x844) sizes.
func bothSizes(t *testing.T, c context.Context, name string) {
	t.Helper()
	for _, v := range []struct {
		size string
		act  chromedp.Action[chromedp.Void]
	}{
		{"phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)},
		{"desktop", chromedp.EmulateViewport(1280, 800)},
	} {
		if err := chromedp.Do(c, v.act); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // a layout pass
		shot(t, c, name+"-"+v.size)
	}
}
