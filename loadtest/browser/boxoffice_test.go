package browser

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The box office, start to finish: an operator signs in, imports a venue
// from a layout file, creates a show on it, publishes it and opens its sale
// from the console; a signed-in fan buys two seats; the operator cancels
// the show and watches every refund settle; the fan's My tickets says the
// show is cancelled and the money refunded. Each page is looked at, phone
// and desktop, with axe-core.
func TestBoxOfficeCancel(t *testing.T) {
	s := newStack(t)
	b := browser(t)
	op := tab(t, b)
	if err := chromedp.Do(op, chromedp.Navigate(s.console+"/admin/")); err != nil {
		t.Fatal(err)
	}
	s.operatorSignIn(t, op)
	click(t, op, "shows-link")
	until(t, op, "the box office page", `document.body.dataset.ready === "1"`, 15*time.Second)

	// A venue from a layout file: the demo's cinema screen, renamed.
	doc, err := os.ReadFile(filepath.Join("..", "..", "core", "seed", "layouts", "cinema.json"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "galaxy.json")
	if err := os.WriteFile(file, []byte(strings.Replace(string(doc), "Regal Talkies, Screen 1", "Galaxy Cinema, Screen 2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(op, chromedp.SetUploadFiles(chromedp.ID("import-file"), []string{file})); err != nil {
		t.Fatal(err)
	}
	click(t, op, "import-go")
	until(t, op, "the imported venue", `/Galaxy Cinema, Screen 2, Mumbai/.test(document.getElementById("layouts").textContent)`, 10*time.Second)

	// A show on it, as a draft, then published.
	ist := time.FixedZone("IST", 5*3600+1800)
	start := time.Now().In(ist).Add(26 * time.Hour).Format("2006-01-02 15:04")
	onsale := time.Now().In(ist).Add(3 * time.Minute).Format("2006-01-02T15:04")
	if err := chromedp.Do(op, chromedp.SendKeys(chromedp.ID("ns-title"), "Dune: Part Two (U/A)")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(op, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
			const sel = document.getElementById("ns-layout");
			sel.value = [...sel.options].find(o => /Galaxy/.test(o.textContent)).value;
			sel.dispatchEvent(new Event("change"));
			document.getElementById("ns-starts").value = %q;
			document.getElementById("ns-onsale").value = %q;
			return true;
		})()`, start, onsale))); err != nil {
		t.Fatal(err)
	}
	look(t, op, "shows-new")
	click(t, op, "ns-create")
	until(t, op, "the draft created", `/Created 1 draft show/.test(document.getElementById("message").textContent)`, 15*time.Second)
	var ev int64
	if err := s.db.QueryRow(ctx, `SELECT id FROM events WHERE name = 'Dune: Part Two (U/A)'`).Scan(&ev); err != nil {
		t.Fatal(err)
	}
	// The console has no waiting room to show for a draft: it says why,
	// and notices when the show is published in another tab.
	console, closeConsole := chromedp.NewContext(op) // a second tab (a session of its own)
	defer closeConsole()
	if err := chromedp.Do(console, chromedp.Navigate(fmt.Sprintf("%s/admin/?event=%d", s.console, ev))); err != nil {
		t.Fatal(err)
	}
	s.operatorSignIn(t, console)
	until(t, console, "the draft's note", `/This show is a draft: fans cannot see it/.test(document.getElementById("message").textContent)`, 10*time.Second)
	look(t, console, "console-draft")
	click(t, op, fmt.Sprintf("publish-%d", ev))
	until(t, op, "the show published", fmt.Sprintf(`document.querySelector("#show-%d .status").textContent === "published"`, ev), 10*time.Second)
	until(t, console, "the console on the published show", `document.body.dataset.ready === "1" && !/draft/.test(document.getElementById("message").textContent)`, 25*time.Second)
	closeConsole()

	// The sale opens now, from the console's on-sale dial (the show's own
	// on-sale time is minutes away); fans must sign in.
	if err := chromedp.Do(op, chromedp.Navigate(fmt.Sprintf("%s/admin/?event=%d", s.console, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, op, "the console's stats", `document.body.dataset.ready === "1"`, 15*time.Second)
	now := time.Now().UTC().Add(-time.Minute).Format("2006-01-02T15:04:05") // the headless browser's zone is UTC
	if _, err := chromedp.Run(op, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
			document.getElementById("onsale_at").value = %q;
			document.getElementById("account_required").checked = true;
			document.getElementById("dials").dispatchEvent(new Event("input"));
			return true;
		})()`, now))); err != nil {
		t.Fatal(err)
	}
	click(t, op, "save")
	until(t, op, "the sale open", `/Saved/.test(document.getElementById("message").textContent) && document.getElementById("state").dataset.state === "admitting"`, 15*time.Second)

	// A fan buys two seats.
	const phone = "+919876500001"
	// The fan finds it in the catalog: a city, a title, a show by its time.
	fan := tab(t, b)
	if err := chromedp.Do(fan, chromedp.Navigate(s.gateway+"/browse")); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the catalog", `document.body.dataset.ready === "1" && [...document.getElementById("city").options].some(o => o.value === "Mumbai")`, 15*time.Second)
	if _, err := chromedp.Run(fan, chromedp.Evaluate[bool](`(() => { const c = document.getElementById("city"); c.value = "Mumbai"; c.dispatchEvent(new Event("change")); return true })()`)); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf(`document.querySelector('a[href="/events/%d"]')`, ev)
	until(t, fan, "the new show in the catalog", link+` !== null && /Dune: Part Two/.test(`+link+`.closest("section").textContent)`, 15*time.Second)
	look(t, fan, "browse")
	if _, err := chromedp.Run(fan, chromedp.Evaluate[bool](link+`.click(), true`)); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the waiting room asking to sign in", `document.body.dataset.state === "signin"`, 20*time.Second)
	s.signIn(t, fan, phone)
	until(t, fan, "admission", `document.body.dataset.state === "admitted"`, 30*time.Second)
	click(t, fan, "go-book")
	click(t, fan, "seat-AUD-F-7")
	click(t, fan, "seat-AUD-F-8")
	click(t, fan, "hold-picked")
	until(t, fan, "the hold", `!document.getElementById("held").hidden`, 10*time.Second)
	click(t, fan, "pay")
	checkout(t, fan, true)
	until(t, fan, "two tickets", `document.body.dataset.tickets === "2"`, 20*time.Second)

	// The operator reads the sales, then cancels the show and watches the refunds.
	if err := chromedp.Do(op, chromedp.Navigate(s.console+"/admin/shows")); err != nil {
		t.Fatal(err)
	}
	until(t, op, "the box office page", `document.body.dataset.ready === "1"`, 15*time.Second)
	click(t, op, fmt.Sprintf("sales-%d", ev))
	until(t, op, "the sales: two sold", `!document.getElementById("sales-panel").hidden && /^Total.*₹[\d,]+.*$/.test(document.querySelector("#sales-rows tr:last-child").textContent) && document.querySelector("#sales-rows tr:last-child td:nth-child(4)").textContent === "2"`, 10*time.Second)
	look(t, op, "shows-sales")
	click(t, op, fmt.Sprintf("cancel-%d", ev))
	until(t, op, "the cancel dialog naming the show", fmt.Sprintf(`document.getElementById("cancel").open && /Dune: Part Two .* #%d/.test(document.getElementById("cancel-which").textContent)`, ev), 5*time.Second)
	if err := chromedp.Do(op, chromedp.SendKeys(chromedp.ID("cancel-reason"), "The projector has failed.")); err != nil {
		t.Fatal(err)
	}
	shot(t, op, "shows-cancel-dialog")
	click(t, op, "cancel-yes")
	until(t, op, "every refund settled", `document.getElementById("progress-panel").dataset.done === "true"`, 60*time.Second)
	if got := text(t, op, `document.getElementById("progress-line").textContent`); !strings.Contains(got, "all 1 booking(s) refunded") {
		t.Errorf("the progress reads %q; want the one booking refunded", got)
	}
	look(t, op, "shows-cancelled")

	// The fan's My tickets says so.
	if err := chromedp.Do(fan, chromedp.Navigate(s.gateway+"/me")); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "My tickets", `document.body.dataset.ready === "1"`, 20*time.Second)
	page := text(t, fan, `document.getElementById("bookings").textContent`)
	for _, want := range []string{"Show cancelled", "The projector has failed", "has been refunded", "no longer valid"} {
		if !strings.Contains(page, want) {
			t.Errorf("My tickets lacks %q: %q", want, page)
		}
	}
	if n := text(t, fan, `String(document.querySelectorAll(".ticket img").length)`); n != "0" {
		t.Errorf("My tickets shows %s QR tickets of the cancelled show; want none", n)
	}
	look(t, fan, "me-cancelled")
	// And the SMS.
	if msgs := s.sms(t, phone); !strings.Contains(strings.Join(msgs, "\n"), "CANCELLED") {
		t.Errorf("the fan's texts %q; want the cancellation", msgs)
	}
}
