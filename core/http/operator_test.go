package http_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/admission"
)

// withOperators wires the operators' API (and the core's tokens) and
// creates an admin, "root", with password rootPassword.
func withOperators(f *fixture, s *corehttp.Server) {
	priv, err := admission.GenerateKey()
	if err != nil {
		panic(err)
	}
	f.keys = token.New(priv)
	s.Tokens = f.keys
	// Cheap hashes (bcrypt's least cost: the test's many sign-ins, under
	// -race) and a lock that does not lift during the test.
	s.Operators = &corehttp.Operators{Store: f.db, Shows: f.db, PasswordCost: bcrypt.MinCost, SignInEvery: time.Hour}
	hash, err := corehttp.HashPassword(rootPassword, bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	if _, err := f.db.CreateOperator(ctx, core.NewOperator{Name: "root", Role: core.RoleAdmin}, hash, core.Actor{Operator: "system:test"}); err != nil {
		panic(err)
	}
}

const rootPassword = "correct horse battery"

// operatorToken signs name in and returns its token.
func (f *fixture) operatorToken(t *testing.T, name, password string) string {
	t.Helper()
	r := f.do(t, "POST", "/operator/v1/sessions", "", map[string]string{"name": name, "password": password}, addr("10.1.0.1")...)
	if r.status != http.StatusCreated {
		t.Fatalf("sign in %s = %d %v", name, r.status, r.body)
	}
	return r.body["token"].(string)
}

// addOperator creates an operator with role (as root) and signs it in.
func (f *fixture) addOperator(t *testing.T, root, name, role string) string {
	t.Helper()
	pw := name + " password 123"
	if r := f.do(t, "POST", "/operator/v1/operators", root, map[string]string{"name": name, "role": role, "password": pw}); r.status != http.StatusCreated {
		t.Fatalf("add operator %s = %d %v", name, r.status, r.body)
	}
	return f.operatorToken(t, name, pw)
}

func layoutDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := seed.LayoutJSON(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOperatorSignIn: a name and password give a token; wrong ones, an
// unknown name and a disabled operator are refused alike; repeated
// failures lock the name at that address (429), not elsewhere.
func TestOperatorSignIn(t *testing.T) {
	f := newFixture(t, "", withOperators)
	root := f.operatorToken(t, "root", rootPassword)
	if r := f.do(t, "GET", "/operator/v1/me", root, nil); r.status != 200 || r.body["operator"].(map[string]any)["role"] != "admin" {
		t.Fatalf("GET me = %d %v", r.status, r.body)
	}
	for _, tc := range []struct{ name, password string }{{"root", "wrong password!!"}, {"nobody", rootPassword}, {"ROOT", rootPassword}} {
		r := f.do(t, "POST", "/operator/v1/sessions", "", map[string]string{"name": tc.name, "password": tc.password}, addr("10.1.0.2")...)
		if r.status != 401 || r.body["error"] != core.EUnauthorized {
			t.Errorf("sign in %s/%s = %d %v; want 401 unauthorized", tc.name, tc.password, r.status, r.body)
		}
	}
	for _, body := range []string{`{}`, `{"name":"root"}`, `not json`, `{"name":"root","password":"x","extra":1}`} {
		if r := f.do(t, "POST", "/operator/v1/sessions", "", body); r.status != 400 {
			t.Errorf("sign in with %s = %d %v; want 400", body, r.status, r.body)
		}
	}
	// Lock root at one address: the right password is refused there too.
	for i := 0; i < 10; i++ {
		f.do(t, "POST", "/operator/v1/sessions", "", map[string]string{"name": "root", "password": "wrong password!!"}, addr("10.1.0.3")...)
	}
	r := f.do(t, "POST", "/operator/v1/sessions", "", map[string]string{"name": "root", "password": rootPassword}, addr("10.1.0.3")...)
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Errorf("sign in after 10 failures = %d %v; want 429 with Retry-After", r.status, r.body)
	}
	f.operatorToken(t, "root", rootPassword) // another address still signs in

	// Disable an operator: its live token and its sign-in stop at once.
	desk := f.addOperator(t, root, "asha", core.RoleSaleDesk)
	if r := f.do(t, "GET", "/operator/v1/me", desk, nil); r.status != 200 {
		t.Fatalf("asha's me = %d %v", r.status, r.body)
	}
	if r := f.do(t, "PATCH", "/operator/v1/operators/asha", root, map[string]any{"disabled": true}); r.status != 200 || r.body["disabled"] != true {
		t.Fatalf("disable asha = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/operator/v1/me", desk, nil); r.status != 403 {
		t.Errorf("a disabled operator's token = %d %v; want 403", r.status, r.body)
	}
	r = f.do(t, "POST", "/operator/v1/sessions", "", map[string]string{"name": "asha", "password": "asha password 123"}, addr("10.1.0.4")...)
	if r.status != 401 {
		t.Errorf("a disabled operator's sign-in = %d %v; want 401", r.status, r.body)
	}
	// A password change ends the operator's sessions; a new sign-in works.
	box := f.addOperator(t, root, "ravi", core.RoleBoxOffice)
	time.Sleep(1100 * time.Millisecond) // a token's iat is to the second
	if r := f.do(t, "PATCH", "/operator/v1/operators/ravi", root, map[string]any{"password": "ravi new password 99"}); r.status != 200 {
		t.Fatalf("change ravi's password = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/operator/v1/me", box, nil); r.status != 401 {
		t.Errorf("a session from before the password change = %d %v; want 401", r.status, r.body)
	}
	time.Sleep(1100 * time.Millisecond)
	if r := f.do(t, "GET", "/operator/v1/me", f.operatorToken(t, "ravi", "ravi new password 99"), nil); r.status != 200 {
		t.Errorf("a session after the password change = %d %v; want 200", r.status, r.body)
	}
	// Admins cannot leave the system without one: demoting the only other
	// admin works, demoting the last one (by another path) does not.
	f.addOperator(t, root, "second", core.RoleAdmin)
	if r := f.do(t, "PATCH", "/operator/v1/operators/second", root, map[string]any{"role": "box_office"}); r.status != 200 {
		t.Errorf("demote the second admin = %d %v", r.status, r.body)
	}
	if _, err := f.db.Pool().Exec(ctx, `UPDATE operators SET role = 'box_office' WHERE name = 'root'`); err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, "PATCH", "/operator/v1/operators/second", root, map[string]any{"display_name": "x"}); r.status != 403 {
		t.Errorf("a change by an operator demoted since its sign-in = %d %v; want 403", r.status, r.body)
	}
	f.db.Pool().Exec(ctx, `UPDATE operators SET role = 'admin' WHERE name = 'root'`)
	// An admin cannot lock themselves out.
	if r := f.do(t, "PATCH", "/operator/v1/operators/root", root, map[string]any{"role": "sale_desk"}); r.status != 409 {
		t.Errorf("root demoting itself = %d %v; want 409", r.status, r.body)
	}
	// Tokens of other kinds are not operators'.
	fan := f.token(t, "vis:fan", f.event)
	if r := f.do(t, "GET", "/operator/v1/me", fan, nil); r.status != 403 {
		t.Errorf("an admit token on the operators' API = %d %v; want 403", r.status, r.body)
	}
	if r := f.do(t, "GET", "/operator/v1/me", "", nil); r.status != 401 {
		t.Errorf("no token = %d %v; want 401", r.status, r.body)
	}
	// An operator token takes no seats.
	if r := f.do(t, "POST", holdsPath(f.event), root, map[string]any{"seats": []string{"AUD-A-1"}}); r.status != 403 {
		t.Errorf("an operator token taking seats = %d %v; want 403", r.status, r.body)
	}
}

// TestOperatorRoles: each role does what core/operator.go gives it, and
// nothing else; every refusal is 403 and changes nothing.
func TestOperatorRoles(t *testing.T) {
	f := newFixture(t, "", withOperators)
	root := f.operatorToken(t, "root", rootPassword)
	box := f.addOperator(t, root, "box", core.RoleBoxOffice)
	desk := f.addOperator(t, root, "desk", core.RoleSaleDesk)
	lay := f.do(t, "POST", "/operator/v1/layouts?name=main", box, layoutDoc(t, "cinema"))
	if lay.status != 201 {
		t.Fatalf("box office imports a layout = %d %v", lay.status, lay.body)
	}
	show := map[string]any{"title": "Dune", "kind": "movie", "layout_id": lay.body["id"],
		"starts": []string{localIn(48 * time.Hour)}, "onsale_at": localIn(time.Hour)}
	for _, tc := range []struct {
		who, method, path string
		tok               string
		body              any
		want              int
	}{
		{"sale desk", "POST", "/operator/v1/layouts?name=other", desk, layoutDoc(t, "cinema"), 403},
		{"sale desk", "POST", "/operator/v1/events", desk, show, 403},
		{"sale desk", "POST", "/operator/v1/operators", desk, map[string]string{"name": "x", "role": "admin", "password": "long enough pw"}, 403},
		{"box office", "POST", "/operator/v1/operators", box, map[string]string{"name": "x", "role": "admin", "password": "long enough pw"}, 403},
		{"box office", "GET", "/operator/v1/audit", box, nil, 403},
		{"sale desk", "GET", "/operator/v1/events", desk, nil, 200},
		{"sale desk", "GET", "/operator/v1/layouts", desk, nil, 200},
		{"box office", "POST", "/operator/v1/events", box, show, 201},
	} {
		if r := f.do(t, tc.method, tc.path, tc.tok, tc.body); r.status != tc.want {
			t.Errorf("%s: %s %s = %d %v; want %d", tc.who, tc.method, tc.path, r.status, r.body, tc.want)
		}
	}
	r := f.do(t, "GET", "/operator/v1/events?status=draft", root, nil)
	if n := len(r.body["events"].([]any)); r.status != 200 || n != 1 {
		t.Errorf("drafts = %d, %d shows; want the one show the box office made (the refused ones made none)", r.status, n)
	}
	if r := f.do(t, "GET", "/operator/v1/layouts", root, nil); len(r.body["layouts"].([]any)) != 1 {
		t.Errorf("layouts = %v; want the one import", r.body)
	}
}

// localIn is now+d as a local time in Mumbai, minutes only.
func localIn(d time.Duration) string {
	return time.Now().Add(d).In(seed.IST).Format("2006-01-02T15:04")
}

// TestLayoutImport: a good layout imports once per name; a bad one is
// refused 400 with problems naming the section, row and seat, and nothing
// is stored.
func TestLayoutImport(t *testing.T) {
	f := newFixture(t, "", withOperators)
	root := f.operatorToken(t, "root", rootPassword)
	r := f.do(t, "POST", "/operator/v1/layouts?name=Screen%201", root, layoutDoc(t, "cinema"))
	if r.status != 201 || r.body["capacity"] != 250.0 || r.body["seated"] != true || r.header.Get("Location") == "" {
		t.Fatalf("import = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", "/operator/v1/layouts?name=Screen%201", root, layoutDoc(t, "cinema")); r.status != 409 {
		t.Errorf("the same name again = %d %v; want 409", r.status, r.body)
	}
	g := f.do(t, "GET", "/operator/v1/layouts/"+itoa(int64(r.body["id"].(float64))), root, nil)
	if g.status != 200 || len(g.body["document"].(map[string]any)["sections"].([]any)) == 0 {
		t.Errorf("GET layout = %d %v", g.status, g.body)
	}
	good := `{"venue":{"name":"Hall","city":"Pune","timezone":"Asia/Kolkata"},"bands":[{"code":"A","name":"A","price_paise":100}],
"sections":[{"code":"S","band":"A","rows":[%s]}]}`
	for _, tc := range []struct {
		name, doc string
		want      []string // in the problems
	}{
		{"duplicate seat", fmt.Sprintf(good, `{"label":"A","numbers":[1,2,2]}`), []string{"row A", "seat S-A-2 appears twice"}},
		{"row without seats", fmt.Sprintf(good, `{"label":"B","from":5,"to":2}`), []string{"rows[0] (row B)", "from 5 to 2"}},
		{"unknown band", fmt.Sprintf(good, `{"label":"C","from":1,"to":3,"band":"VIP"}`), []string{"row C", `no band "VIP"`}},
		{"row without label", fmt.Sprintf(good, `{"from":1,"to":3}`), []string{"rows[0]", "label"}},
		{"bad zone", strings.Replace(fmt.Sprintf(good, `{"label":"A","from":1,"to":2}`), "Asia/Kolkata", "Mars/Olympus", 1), []string{"venue.timezone"}},
		{"not JSON", "{\n\"venue\": nope}", []string{"line 2, column"}},
		{"wrong type", "{\"venue\": {\"name\": 7}}", []string{"line 1", "venue.name"}},
		{"unknown field", `{"venue":{},"seats":[]}`, []string{`unknown field "seats"`}},
	} {
		r := f.do(t, "POST", "/operator/v1/layouts?name=bad", root, tc.doc)
		text := fmt.Sprint(r.body["problems"], r.body["message"])
		if r.status != 400 || r.body["error"] != core.EInvalid || r.body["problems"] == nil {
			t.Errorf("%s: import = %d %v; want 400 with problems", tc.name, r.status, r.body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: problems %s do not name %q", tc.name, text, w)
			}
		}
	}
	if r := f.do(t, "POST", "/operator/v1/layouts?name=%00", root, layoutDoc(t, "cinema")); r.status != 400 {
		t.Errorf("a bad name = %d %v; want 400", r.status, r.body)
	}
	if r := f.do(t, "POST", "/operator/v1/layouts?name=shouted", root, strings.Replace(layoutDoc(t, "cinema"), `"venue"`, `"Venue"`, 1)); r.status != 400 {
		t.Errorf("a member named in another case = %d %v; want 400", r.status, r.body)
	}
	if r := f.do(t, "GET", "/operator/v1/layouts", root, nil); len(r.body["layouts"].([]any)) != 1 {
		t.Errorf("layouts after the refusals = %v; want only the first import", r.body)
	}
}

// TestShowLifecycle: an operator creates a series of draft shows, which
// fans cannot see or buy; edits them (audited before and after); publishes
// one, which fans then see and buy at the edited price; closes it, which
// stops the sale; and cannot edit a show whose sale is about to open.
func TestShowLifecycle(t *testing.T) {
	f := newFixture(t, "", withOperators)
	root := f.operatorToken(t, "root", rootPassword)
	box := f.addOperator(t, root, "meera", core.RoleBoxOffice)
	lay := f.do(t, "POST", "/operator/v1/layouts", box, layoutDoc(t, "cinema"))
	layoutID := lay.body["id"]
	day := time.Now().Add(72 * time.Hour).In(seed.IST).Format(time.DateOnly)
	create := map[string]any{"title": "Interstellar (U/A)", "kind": "movie", "layout_id": layoutID,
		"starts": []string{day + "T18:30", day + "T21:45"}, "onsale_at": localIn(2 * time.Hour),
		"prices": map[string]int64{"RECLINER": 90000}, "max_per_account": 4, "hold_seconds": 300}
	r := f.do(t, "POST", "/operator/v1/events", box, create, "X-Request-Id", "req-create-1")
	if r.status != 201 {
		t.Fatalf("create = %d %v", r.status, r.body)
	}
	shows := r.body["events"].([]any)
	if len(shows) != 2 {
		t.Fatalf("created %d shows; want 2", len(shows))
	}
	first, second := shows[0].(map[string]any), shows[1].(map[string]any)
	id := int64(first["id"].(float64))
	if first["status"] != "draft" || first["series_id"] != first["id"] || second["series_id"] != first["id"] {
		t.Errorf("shows = %v; want drafts of one series", shows)
	}
	if got := first["starts_at"].(string); !strings.HasPrefix(got, day+"T13:00:00Z") {
		t.Errorf("18:30 in Mumbai starts at %s; want %sT13:00:00Z", got, day)
	}
	if price(first, "RECLINER") != 90000 || price(first, "PRIME") != 35000 {
		t.Errorf("bands = %v; want RECLINER set to 90000, PRIME the layout's 35000", first["price_bands"])
	}
	// Fans see no draft and cannot hold a seat in it.
	if r := f.do(t, "GET", "/v1/events/"+itoa(id), "", nil); r.status != 404 {
		t.Errorf("a draft to fans = %d; want 404", r.status)
	}
	if r := f.do(t, "POST", holdsPath(id), f.token(t, "vis:a", id), map[string]any{"seats": []string{"AUD-A-1"}}); r.status != 409 || r.body["error"] != core.ENotOnSale {
		t.Errorf("a hold in a draft = %d %v; want 409 not_on_sale", r.status, r.body)
	}
	// Edit: bad input changes nothing; a good edit is audited.
	for _, bad := range []map[string]any{{}, {"prices": map[string]int64{"GOLD": 1}}, {"max_per_account": 0}, {"starts_at": "yesterday"},
		{"onsale_at": localIn(-time.Hour)}, {"hold_seconds": 5}, {"title": ""}} {
		if r := f.do(t, "PATCH", "/operator/v1/events/"+itoa(id), box, bad); r.status != 400 {
			t.Errorf("PATCH %v = %d %v; want 400", bad, r.status, r.body)
		}
	}
	r = f.do(t, "PATCH", "/operator/v1/events/"+itoa(id), box, map[string]any{"prices": map[string]int64{"CLASSIC": 27500}, "title": "Interstellar (U/A) IMAX"},
		"X-Request-Id", "req-edit-1")
	if r.status != 200 || r.body["name"] != "Interstellar (U/A) IMAX" || price(r.body, "CLASSIC") != 27500 {
		t.Fatalf("PATCH = %d %v", r.status, r.body)
	}
	if id := r.header.Get("X-Request-Id"); id != "req-edit-1" {
		t.Errorf("the answer's X-Request-Id = %q; want the caller's req-edit-1", id)
	}
	a := f.do(t, "GET", "/operator/v1/events/"+itoa(id)+"/audit", box, nil)
	entries := a.body["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("audit = %v; want create and update", a.body)
	}
	upd := entries[0].(map[string]any)
	if upd["action"] != "show.update" || upd["actor"] != "meera" || upd["request_id"] != "req-edit-1" ||
		upd["before"].(map[string]any)["name"] != "Interstellar (U/A)" || upd["after"].(map[string]any)["name"] != "Interstellar (U/A) IMAX" {
		t.Errorf("update audit = %v", upd)
	}
	// Publish: fans see it; the sale (opened early here, by the database)
	// prices holds at the edited price.
	if r := f.do(t, "POST", "/operator/v1/events/"+itoa(id)+"/publish", box, nil); r.status != 200 || r.body["status"] != "published" {
		t.Fatalf("publish = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", "/operator/v1/events/"+itoa(id)+"/publish", box, nil); r.status != 409 {
		t.Errorf("publish twice = %d %v; want 409", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/events/"+itoa(id), "", nil); r.status != 200 || r.body["status"] != "published" {
		t.Errorf("published show to fans = %d %v", r.status, r.body)
	}
	if _, err := f.db.Pool().Exec(ctx, `UPDATE events SET onsale_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	h := f.do(t, "POST", holdsPath(id), f.token(t, "vis:a", id), map[string]any{"seats": []string{"AUD-A-1"}})
	if h.status != 201 || h.body["amount_paise"] != 27500.0 {
		t.Errorf("hold in the published show = %d %v; want 201 at 27500 paise", h.status, h.body)
	}
	// The sale has opened: no more edits.
	if r := f.do(t, "PATCH", "/operator/v1/events/"+itoa(id), box, map[string]any{"title": "x"}); r.status != 409 || r.body["error"] != core.EShowLocked {
		t.Errorf("edit after the sale opened = %d %v; want 409 show_locked", r.status, r.body)
	}
	// Close: the sale stops (this core at once).
	if r := f.do(t, "POST", "/operator/v1/events/"+itoa(id)+"/close", box, nil); r.status != 200 || r.body["status"] != "closed" {
		t.Fatalf("close = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", holdsPath(id), f.token(t, "vis:b", id), map[string]any{"seats": []string{"AUD-A-2"}}); r.status != 409 || r.body["error"] != core.ENotOnSale {
		t.Errorf("a hold in a closed show = %d %v; want 409 not_on_sale", r.status, r.body)
	}
	// Bad creates change nothing.
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
	}{
		{"no layout", func(m map[string]any) { m["layout_id"] = 999999 }},
		{"no starts", func(m map[string]any) { m["starts"] = []string{} }},
		{"start before the sale", func(m map[string]any) { m["starts"] = []string{localIn(30 * time.Minute)} }},
		{"the same start twice", func(m map[string]any) { m["starts"] = []string{day + "T10:00", day + "T10:00"} }},
		{"bad kind", func(m map[string]any) { m["kind"] = "opera" }},
		{"unknown band", func(m map[string]any) { m["prices"] = map[string]int64{"GOLD": 100} }},
		{"negative price", func(m map[string]any) { m["prices"] = map[string]int64{"PRIME": -1} }},
		{"bad time", func(m map[string]any) { m["onsale_at"] = "noon" }},
		{"too many per account", func(m map[string]any) { m["max_per_account"] = 65 }},
	} {
		body := map[string]any{}
		for k, v := range create {
			body[k] = v
		}
		tc.edit(body)
		if r := f.do(t, "POST", "/operator/v1/events", box, body); r.status != 400 {
			t.Errorf("%s: create = %d %v; want 400", tc.name, r.status, r.body)
		}
	}
	if r := f.do(t, "GET", "/operator/v1/events?limit=200", root, nil); len(r.body["events"].([]any)) != 5 {
		t.Errorf("shows after the refused creates = %d; want the fixture's 3 and the 2 created", len(r.body["events"].([]any)))
	}
}

func price(event map[string]any, band string) int64 {
	for _, b := range event["price_bands"].([]any) {
		if m := b.(map[string]any); m["code"] == band {
			return int64(m["price_paise"].(float64))
		}
	}
	return -1
}

// TestCatalogPages: the catalog lists upcoming shows soonest first, a page
// at a time; walking the cursors visits each show once; a page size past
// the maximum is refused rather than cut; past shows list apart.
func TestCatalogPages(t *testing.T) {
	f := newFixture(t, "")
	now := time.Now()
	for i := 0; i < 7; i++ {
		if _, err := f.db.CreateEvent(ctx, seed.EventSpec{Name: fmt.Sprintf("Show %d", i), Kind: core.KindConcert, Layout: seed.MustLayout("amphitheatre"),
			StartsAt: now.Add(time.Duration(7-i) * time.Hour), OnsaleAt: now.Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.db.CreateEvent(ctx, seed.EventSpec{Name: "Yesterday", Kind: core.KindConcert, Layout: seed.MustLayout("amphitheatre"),
		StartsAt: now.Add(-24 * time.Hour), OnsaleAt: now.Add(-48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var last string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("more than 5 pages of 3 for 10 shows")
		}
		r := f.do(t, "GET", "/v1/events?limit=3&cursor="+cursor, "", nil)
		if r.status != 200 {
			t.Fatalf("page %d = %d %v", pages, r.status, r.body)
		}
		for _, e := range r.body["events"].([]any) {
			m := e.(map[string]any)
			if s := m["starts_at"].(string); s < last {
				t.Errorf("%s starts %s, before the show listed ahead of it (%s)", m["name"], s, last)
			} else {
				last = s
			}
			seen = append(seen, m["name"].(string))
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 10 || seen[0] != "Show 6" || strings.Contains(strings.Join(seen, ","), "Yesterday") {
		t.Errorf("upcoming = %v; want the 10 upcoming shows once each, soonest (Show 6) first, not yesterday's", seen)
	}
	if r := f.do(t, "GET", "/v1/events?past=true", "", nil); len(r.body["events"].([]any)) != 1 {
		t.Errorf("past = %v; want yesterday's show", r.body)
	}
	for _, q := range []string{"limit=201", "limit=0", "limit=x", "cursor=abc", "past=maybe", "citi=Pune", "status=draft"} {
		if r := f.do(t, "GET", "/v1/events?"+q, "", nil); r.status != 400 || r.body["error"] != core.EInvalid {
			t.Errorf("GET /v1/events?%s = %d %v; want 400", q, r.status, r.body)
		}
	}
}

// raw GETs path with token and returns the answer as it is (CSV, PNG).
func (f *fixture) raw(t *testing.T, path, token string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestShowReports walks a show's reads end to end, each exchange checked
// against the OpenAPI document: its layout and counts, a ticket's QR code,
// the operators' list, the show for operators, its sales and attendee
// list (JSON and CSV), then its cancellation and the refunds' progress.
func TestShowReports(t *testing.T) {
	f := newFixture(t, "", withOperators, withPayments, func(f *fixture, s *corehttp.Server) { s.Layouts = f.db })
	root := f.operatorToken(t, "root", rootPassword)
	ev := itoa(f.event)
	if r := f.do(t, "GET", "/v1/events/"+ev+"/layout", "", nil); r.status != 200 || r.body["capacity"] == nil || len(r.body["sections"].([]any)) == 0 {
		t.Fatalf("layout = %d %v", r.status, r.body)
	}
	before := f.do(t, "GET", "/v1/events/"+ev+"/stats", "", nil)
	if before.status != 200 || before.body["sold"] != 0.0 {
		t.Fatalf("stats = %d %v", before.status, before.body)
	}
	// One booking of two seats, paid and captured.
	h := f.hold(t, "vis:reports", "AUD-C-3", "AUD-C-4")
	grant := h.body["hold_token"].(string)
	pay := f.do(t, "POST", "/v1/holds/"+h.body["hold_id"].(string)+"/payment", grant, map[string]string{"phone": "+919800000009"}, "Idempotency-Key", "reports-1")
	b := bookingID(t, pay)
	f.settle(t, b)
	if _, err := f.db.Pool().Exec(ctx, `UPDATE bookings SET captured_at = now() WHERE id = $1`, b); err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, "GET", "/v1/events/"+ev+"/stats", "", nil); r.body["sold"] != 2.0 {
		t.Errorf("stats after a booking of two = %v; want sold 2", r.body)
	}
	qr := "/v1/bookings/" + itoa(b) + "/tickets/"
	if st, ct, png := f.raw(t, qr+"1/qr.png", grant); st != 200 || ct != "image/png" || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("ticket 1's QR = %d %s %.8q; want a PNG", st, ct, png)
	}
	if r := f.do(t, "GET", qr+"3/qr.png", grant, nil); r.status != 404 {
		t.Errorf("ticket 3 of 2's QR = %d; want 404", r.status)
	}
	if r := f.do(t, "GET", "/operator/v1/operators", root, nil); r.status != 200 || len(r.body["operators"].([]any)) != 1 {
		t.Errorf("operators = %d %v; want root alone", r.status, r.body)
	}
	if r := f.do(t, "GET", "/operator/v1/events/"+ev, root, nil); r.status != 200 || r.body["name"] != "Monsoon Nights" {
		t.Errorf("show for operators = %d %v", r.status, r.body)
	}
	sales := f.do(t, "GET", "/operator/v1/events/"+ev+"/sales", root, nil)
	if total := sales.body["total"].(map[string]any); sales.status != 200 || total["sold"] != 2.0 || total["revenue_paise"] != pay.body["booking"].(map[string]any)["amount_paise"] {
		t.Errorf("sales = %d %v; want 2 sold for the booking's amount", sales.status, sales.body)
	}
	att := f.do(t, "GET", "/operator/v1/events/"+ev+"/attendees", root, nil)
	if list := att.body["attendees"].([]any); att.status != 200 || len(list) != 2 || list[0].(map[string]any)["phone"] != "+919800000009" {
		t.Errorf("attendees = %d %v; want two tickets with the buyer's phone", att.status, att.body)
	}
	for _, what := range []string{"sales", "attendees"} {
		if st, ct, csv := f.raw(t, "/operator/v1/events/"+ev+"/"+what+"?format=csv", root); st != 200 || ct != "text/csv; charset=utf-8" || bytes.Count(csv, []byte("\n")) < 2 {
			t.Errorf("%s as CSV = %d %s %q", what, st, ct, csv)
		}
		if r := f.do(t, "GET", "/operator/v1/events/"+ev+"/"+what+"?format=xml", root, nil); r.status != 400 {
			t.Errorf("%s as XML = %d; want 400", what, r.status)
		}
	}
	c := f.do(t, "POST", "/operator/v1/events/"+ev+"/cancel", root, map[string]string{"reason": "the monsoon"})
	if c.status != 200 || c.body["event"].(map[string]any)["status"] != "cancelled" || c.body["cancellation"].(map[string]any)["bookings"] != 1.0 {
		t.Fatalf("cancel = %d %v", c.status, c.body)
	}
	if r := f.do(t, "GET", "/operator/v1/events/"+ev+"/cancellation", root, nil); r.status != 200 || r.body["refund_due"] != 1.0 || r.body["done"] != false {
		t.Errorf("cancellation = %d %v; want one refund due, not done", r.status, r.body)
	}
	if r := f.do(t, "POST", "/operator/v1/events/"+ev+"/cancel", root, map[string]string{"reason": "again"}); r.status != 409 {
		t.Errorf("cancel twice = %d %v; want 409", r.status, r.body)
	}
	// The whole log, for the admin, narrowed to the show: its cancellation.
	if r := f.do(t, "GET", "/operator/v1/audit?subject=event:"+ev+"&limit=5", root, nil); r.status != 200 || len(r.body["entries"].([]any)) != 1 ||
		r.body["entries"].([]any)[0].(map[string]any)["action"] != "show.cancel" {
		t.Errorf("audit of the show = %d %v; want its one cancellation", r.status, r.body)
	}
	if r := f.do(t, "GET", "/readyz", "", nil); r.status != 200 || r.body["status"] != "ready" {
		t.Errorf("readyz = %d %v", r.status, r.body)
	}
}
