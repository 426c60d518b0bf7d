// Package ctl tests bin/onsalectl against the real services: a stack of
// the core, a gateway and the payment simulator on a database and Redis of
// the test's own; the CLI talks to the gateway's operators' listener, as
// an operator's would.
package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/servicetest"
)

var ctx = context.Background()

type cli struct {
	bin, url, tokenFile string
	env                 []string
}

// run runs onsalectl with args (and stdin), returning its exit status,
// stdout and stderr.
func (c cli) run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(c.bin, append([]string{"-url", c.url, "-token-file", c.tokenFile}, args...)...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// ok runs a command that must succeed and returns its stdout.
func (c cli) ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := c.run(t, "", args...)
	if code != 0 {
		t.Fatalf("onsalectl %s = exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func TestOnsalectl(t *testing.T) {
	redis := servicetest.Env(t, "REDIS_URL")
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	dir := t.TempDir()
	apps, err := stack.Start(ctx, stack.Options{Dir: dir, DatabaseURL: dbURL, RedisURL: redis,
		CoreEnv: []string{"ONSALE_LOG_LEVEL=warn"}, GatewayEnv: []string{"ONSALE_LOG_LEVEL=warn"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apps.Stop() })
	if err := stack.SpreadEventIDs(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	bin, err := stack.Binary("", "onsalectl")
	if err != nil {
		t.Fatal(err)
	}
	ops := cli{bin: bin, url: apps.GatewayAdminURL, tokenFile: filepath.Join(dir, "ops.token")}

	// Help for everything, usage errors exit 2.
	if code, out, _ := ops.run(t, "", "help"); code != 0 || !strings.Contains(out, "shows cancel") || !strings.Contains(out, "dials set") {
		t.Errorf("help = %d %q; want every command", code, out)
	}
	if code, _, errOut := ops.run(t, "", "shows", "cancel", "-h"); code != 0 || !strings.Contains(errOut, "every booking refunded") {
		t.Errorf("shows cancel -h = %d %q; want its help", code, errOut)
	}
	if code, _, _ := ops.run(t, "", "shows", "explode", "1"); code != 2 {
		t.Errorf("an unknown command = exit %d; want 2", code)
	}
	// Not signed in: refused, exit 1, saying how to sign in.
	if code, _, errOut := ops.run(t, "", "whoami"); code != 1 || !strings.Contains(errOut, "onsalectl login") {
		t.Errorf("whoami signed out = %d %q; want 1 and how to sign in", code, errOut)
	}
	if code, _, errOut := ops.run(t, "wrong password\n", "login", "-name", apps.OperatorName); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("login with a wrong password = %d %q; want 1 and the 401", code, errOut)
	}
	if code, out, errOut := ops.run(t, apps.OperatorPassword+"\n", "login", "-name", apps.OperatorName); code != 0 || !strings.Contains(out, "signed in as ops (admin)") {
		t.Fatalf("login = %d %q %q", code, out, errOut)
	}
	if out := ops.ok(t, "whoami"); !strings.Contains(out, `"role": "admin"`) {
		t.Fatalf("login = %q", out)
	}
	_ = ops.ok(t, "-json", "whoami")

	// A layout: a bad file lists its problems; the cinema imports.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"venue":{"name":"Hall","city":"Pune"},"bands":[{"code":"A","price_paise":1}],"sections":[{"code":"S","band":"A","rows":[{"label":"A","numbers":[1,1]}]}]}`), 0o644)
	if code, _, errOut := ops.run(t, "", "layouts", "import", bad); code != 1 || !strings.Contains(errOut, "seat S-A-1 appears twice") {
		t.Errorf("a bad layout = %d %q; want 1 naming the seat", code, errOut)
	}
	cinema := filepath.Join("..", "..", "core", "seed", "layouts", "cinema.json")
	var lay struct{ ID int64 }
	json.Unmarshal([]byte(ops.ok(t, "-json", "layouts", "import", cinema, "-name", "Screen 1")), &lay)
	if lay.ID == 0 {
		t.Fatal("no layout id")
	}

	// Two draft shows, listed, edited, one published.
	day := time.Now().Add(72 * time.Hour).Format("2006-01-02")
	onsale := time.Now().Add(2 * time.Hour).In(time.FixedZone("IST", 5*3600+1800)).Format("2006-01-02T15:04")
	var created struct{ Events []struct{ ID int64 } }
	json.Unmarshal([]byte(ops.ok(t, "-json", "shows", "create", "-title", "Dune (U/A)", "-kind", "movie", "-layout", itoa(lay.ID),
		"-start", day+"T18:30", "-start", day+"T21:45", "-onsale", onsale, "-price", "PRIME=40000")), &created)
	if len(created.Events) != 2 {
		t.Fatalf("created %v; want two shows", created)
	}
	show := itoa(created.Events[0].ID)
	if out := ops.ok(t, "shows", "list", "-status", "draft"); strings.Count(out, "Dune (U/A)") != 2 || !strings.Contains(out, "18:30") {
		t.Errorf("drafts:\n%s\nwant both shows, at 18:30 and 21:45 venue time", out)
	}
	if code, _, _ := ops.run(t, "", "shows", "edit", show, "-price", "PRIME"); code != 2 {
		t.Errorf("a malformed -price = exit %d; want 2", code)
	}
	if code, _, errOut := ops.run(t, "", "shows", "edit", show, "-price", "GOLD=1"); code != 1 || !strings.Contains(errOut, `no band "GOLD"`) {
		t.Errorf("an unknown band = %d %q; want 1 naming it", code, errOut)
	}
	ops.ok(t, "shows", "edit", show, "-title", "Dune (U/A) IMAX")
	if out := ops.ok(t, "shows", "publish", show); !strings.Contains(out, "published") {
		t.Errorf("publish = %q", out)
	}

	// The waiting room: dials set and read, live numbers watched.
	if out := ops.ok(t, "dials", "set", show, "new_users_per_minute=120", "paused=true"); !strings.Contains(out, "new_users_per_minute = 120") || !strings.Contains(out, "paused = true") {
		t.Errorf("dials set = %q", out)
	}
	if out := ops.ok(t, "stats", "watch", show, "-n", "2", "-every", "100ms"); strings.Count(out, "bound paused") != 2 {
		t.Errorf("stats watch = %q; want two samples bound by the pause", out)
	}
	if code, _, errOut := ops.run(t, "", "dials", "set", show, "new_users_per_minute=-5"); code != 1 || !strings.Contains(errOut, "400") {
		t.Errorf("a bad dial = %d %q; want 1 and the 400", code, errOut)
	}
	if out := ops.ok(t, "shows", "sales", show, "-csv"); !strings.HasPrefix(out, "band,name,price_inr,capacity,sold") || !strings.Contains(out, "TOTAL,,,250,0,0,250") {
		t.Errorf("sales CSV = %q", out)
	}
	if out := ops.ok(t, "shows", "audit", show); !strings.Contains(out, "dials.update") || !strings.Contains(out, "show.publish") {
		t.Errorf("audit = %q; want the dial change and the publish", out)
	}

	// Roles: a sale desk operator sets dials but cannot publish or cancel.
	add := cli{bin: bin, url: ops.url, tokenFile: ops.tokenFile, env: []string{"ONSALE_PASSWORD=desk password 1234"}}
	add.ok(t, "operators", "add", "-name", "desk", "-role", "sale_desk")
	desk := cli{bin: bin, url: ops.url, tokenFile: filepath.Join(dir, "desk.token"), env: add.env}
	desk.ok(t, "login", "-name", "desk")
	desk.ok(t, "dials", "set", show, "paused=false")
	if code, _, errOut := desk.run(t, "", "shows", "close", show); code != 1 || !strings.Contains(errOut, "403") {
		t.Errorf("sale desk closing a show = %d %q; want 1 and 403", code, errOut)
	}

	// Cancel: refused without -yes; with it, followed to the end.
	if code, _, errOut := ops.run(t, "", "shows", "cancel", show); code != 2 || !strings.Contains(errOut, "-yes") {
		t.Errorf("cancel without -yes = %d %q; want 2 asking for -yes", code, errOut)
	}
	if out := ops.ok(t, "shows", "cancel", show, "-yes", "-reason", "Print damaged."); !strings.Contains(out, "done true") {
		t.Errorf("cancel = %q; want it followed until done", out)
	}
	// The admit keys the gateway publishes; compared across gateways, as
	// after each step of a rotation. Control: a gateway publishing another
	// ring (one not yet restarted) is caught.
	if out := ops.ok(t, "keys", "jwks"); !strings.Contains(out, "signs new admit tokens") {
		t.Errorf("keys jwks = %q", out)
	}
	if out := ops.ok(t, "keys", "jwks", "-gateways", ops.url+","+ops.url); strings.Count(out, "signs new admit tokens") != 2 {
		t.Errorf("keys jwks of two gateways alike = %q", out)
	}
	stale := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA","kid":"an-older-key"}]}`))
	}))
	defer stale.Close()
	if code, out, errOut := ops.run(t, "", "keys", "jwks", "-gateways", ops.url+","+stale.URL); code != 1 || !strings.Contains(errOut, "different keys") || !strings.Contains(out, "an-older-key") {
		t.Errorf("keys jwks of two gateways that disagree = %d %q %q; want 1, each ring shown, the disagreement named", code, out, errOut)
	}
	// Disabling desk ends its session at once.
	ops.ok(t, "operators", "disable", "desk")
	if code, _, errOut := desk.run(t, "", "dials", "set", show, "paused=true"); code != 1 || !strings.Contains(errOut, "403") {
		t.Errorf("a disabled operator's dial change = %d %q; want 1 and 403", code, errOut)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
