package topology

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/paysig"
)

// needTopology skips (or, under ONSALE_REQUIRE_SERVICES=1, fails) when an
// engine or a binary the topology runs is missing.
func needTopology(t *testing.T) {
	t.Helper()
	var missing []string
	for _, b := range []string{"etcd", "patroni", "haproxy", "redis-server", "redis-cli"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if _, err := pgBinaries(); err != nil {
		missing = append(missing, err.Error())
	}
	for _, b := range []string{stack.Paysim, stack.Core, stack.Gateway} {
		if _, err := stack.Binary("", b); err != nil {
			missing = append(missing, err.Error())
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("ONSALE_REQUIRE_SERVICES") == "1" {
		t.Fatalf("missing: %s", strings.Join(missing, "; "))
	}
	t.Skipf("missing (ONSALE_REQUIRE_SERVICES=1 makes this a failure): %s", strings.Join(missing, "; "))
}

// The template expands to a configuration HAProxy accepts; a placeholder
// left without a value is refused before HAProxy sees it.
func TestRenderHAProxy(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("ONSALE_REQUIRE_SERVICES") == "1" {
			t.Fatal("no haproxy")
		}
		t.Skip("no haproxy")
	}
	path, err := pgRepoFile("deploy/ha/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := HAProxyConfig{Bind: "127.0.0.1", FansPort: 7480, CoresPort: 7481, PGPrimaryPort: 7410, PGReplicasPort: 7409,
		StatsPort: 7489, StatsSocket: filepath.Join(dir, "admin.sock"), MaxConn: 1000,
		Gateways: []string{"127.0.0.1:7451", "127.0.0.1:7452", "127.0.0.1:7453"}, Cores: []string{"127.0.0.1:7461", "127.0.0.1:7462"},
		PG: []PGServer{{"pg1", "127.0.0.1:7411", 7421}, {"pg2", "127.0.0.1:7412", 7422}, {"pg3", "127.0.0.1:7413", 7423}}}
	out, err := RenderHAProxy(string(tmpl), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server gw3 127.0.0.1:7453", "server core2 127.0.0.1:7462", "server pg2 127.0.0.1:7412 check port 7422",
		"server gw2-fallback 127.0.0.1:7452 backup no-check", "send-proxy-v2", "check-send-proxy", "retry-on conn-failure", "option redispatch"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(haproxy, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, b)
	}
	// an operator's privilege lines (Debian's haproxy user; checked by
	// haproxy -c only where that user exists)
	c.Privileges = "    user haproxy\n    group haproxy\n    chroot /var/lib/haproxy"
	if out, err := RenderHAProxy(string(tmpl), c); err != nil || !strings.Contains(out, "\n    user haproxy\n    group haproxy\n    chroot /var/lib/haproxy\n") {
		t.Errorf("RenderHAProxy with privileges: %v; lines missing", err)
	}
	c.Privileges = ""
	long := c
	long.StatsSocket = "/tmp/" + strings.Repeat("d", 110) + "/admin.sock"
	if _, err := RenderHAProxy(string(tmpl), long); err == nil || !strings.Contains(err.Error(), "107") {
		t.Errorf("RenderHAProxy with a %d-byte socket path = %v; want an error", len(long.StatsSocket), err)
	}
	c.Cores = nil
	if _, err := RenderHAProxy(string(tmpl), c); err == nil || !strings.Contains(err.Error(), "CORE_SERVERS") {
		t.Errorf("RenderHAProxy without cores = %v; want an error naming CORE_SERVERS", err)
	}
}

// The whole topology, through HAProxy: the fans' frontend answers and
// passes a request on to a core; each gateway counts a fan by the address
// HAProxy's PROXY v2 header names (not HAProxy's own); a core killed with
// SIGKILL is taken out of rotation and requests through the cores'
// frontend keep succeeding; a killed core starts again; Stop leaves no
// process behind.
func TestTopology(t *testing.T) {
	needTopology(t)
	base, err := FreeBlock(BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// one join every 2 s per address, a burst of 2: a few joins from one
	// address reach the limit, and it stays reached for the test's moment
	began := time.Now()
	topo, err := Start(ctx, Options{Dir: t.TempDir(), Base: base, Gateways: 2, Cores: 2, GatewayEnv: []string{"ONSALE_IP_RATE=0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the topology started in %v", time.Since(began).Round(10*time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			topo.Stop()
		}
	})

	fan := FanClient(FanAddr)
	if code, body := get(t, fan, topo.GatewayURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("GET /readyz through HAProxy = %d %s", code, body)
	}
	// the catalog: HAProxy -> a gateway -> HAProxy -> a core -> PostgreSQL
	if code, body := get(t, fan, topo.GatewayURL+"/v1/events"); code != http.StatusOK || !strings.HasPrefix(body, `{"events"`) {
		t.Fatalf("GET /v1/events through HAProxy = %d %s", code, body)
	}

	// The operators' listeners: each gateway's console and /metrics, each
	// core's /metrics, there and not through HAProxy's fans' frontend.
	for _, u := range append(append([]string{}, topo.GatewayAdminURLs...), topo.CoreAdminURLs...) {
		if code, body := get(t, http.DefaultClient, u+"/metrics"); code != http.StatusOK || !strings.Contains(body, "# TYPE ") {
			t.Errorf("GET %s/metrics = %d %.100s; want 200 with Prometheus text", u, code, body)
		}
	}
	if code, _ := get(t, http.DefaultClient, topo.GatewayAdminURLs[0]+"/admin/"); code != http.StatusOK {
		t.Errorf("the console on gw1's operators' listener = %d; want 200", code)
	}
	for _, p := range []string{"/metrics", "/admin/"} {
		if code, _ := get(t, fan, topo.GatewayURL+p); code != http.StatusNotFound {
			t.Errorf("GET %s through the fans' frontend = %d; want 404 (operators' listener only)", p, code)
		}
	}

	t.Run("client address from PROXY v2", func(t *testing.T) {
		// Joins of an event that does not exist are counted per client
		// address (in each gateway's memory) before the event is looked up.
		// Every connection is new, so HAProxy deals them to the gateways in
		// turn: once one address is refused by every gateway in a row,
		// another address is refused by none. Were the gateways counting
		// HAProxy's address, both would share one exhausted bucket.
		busy, other := FanClient("127.0.0.3"), FanClient("127.0.0.4")
		busy.Transport.(*http.Transport).DisableKeepAlives = true
		other.Transport.(*http.Transport).DisableKeepAlives = true
		inRow := 0
		for i := 0; i < 40 && inRow < len(topo.Gateways); i++ {
			if code, _ := post(t, busy, topo.GatewayURL+"/v1/events/999999999/queue"); code == http.StatusTooManyRequests {
				inRow++
			} else {
				inRow = 0
			}
		}
		if inRow < len(topo.Gateways) {
			t.Fatalf("40 joins from 127.0.0.3 were never refused by every gateway in a row: the control failed")
		}
		for range topo.Gateways {
			if code, body := post(t, other, topo.GatewayURL+"/v1/events/999999999/queue"); code == http.StatusTooManyRequests || code == 0 {
				t.Fatalf("a join from 127.0.0.4 = %d %s: it shares 127.0.0.3's limit (the gateway does not see the fan's address)", code, body)
			}
		}
	})

	// The provider's webhooks come to the fans' frontend (paysim's do) and a
	// gateway passes them to a core, which verifies them: a forged one is
	// the core's bad_signature, a signed one (of an order no core knows)
	// the core's acknowledgement. The cores' frontend need face no one else.
	t.Run("webhook through a gateway", func(t *testing.T) {
		hook := topo.GatewayURL + "/v1/webhooks/payments"
		body := []byte(`{"id":"evt_topology","type":"payment.succeeded","data":{"object":{"id":"pay_x","status":"succeeded","reference":"booking_0"}}}`)
		send := func(sig string) (int, string) {
			req, _ := http.NewRequest("POST", hook, bytes.NewReader(body))
			req.Header.Set(paysig.Header, sig)
			resp, err := fan.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, b := send("t=1,v1=00"); code == http.StatusOK || !strings.Contains(b, "signature") {
			t.Fatalf("a forged webhook through a gateway = %d %s; want the core's bad signature", code, b)
		}
		if code, b := send(paysig.Sign([]byte(stack.WebhookSecret), time.Now(), body)); code != http.StatusOK || !strings.Contains(b, `"received":true`) {
			t.Fatalf("a signed webhook through a gateway = %d %s; want the core's acknowledgement", code, b)
		}
	})

	t.Run("core killed", func(t *testing.T) {
		direct := &http.Client{Timeout: 10 * time.Second}
		if err := topo.Cores[0].Kill(); err != nil {
			t.Fatal(err)
		}
		// right after the kill, before HAProxy's checks notice: a failed
		// connection is retried on the other core
		early := 0
		for range 20 {
			if code, _ := get(t, direct, topo.CoreURL+"/v1/events"); code != http.StatusOK {
				early++
			}
		}
		t.Logf("requests failed between the kill and HAProxy marking the core down: %d of 20", early)
		if err := topo.WaitServers(ctx, BackendCores, 1, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if code, body := get(t, direct, topo.CoreURL+"/v1/events"); code != http.StatusOK {
				t.Fatalf("request %d through the cores' frontend with core1 down = %d %s", i, code, body)
			}
		}
		if code, body := get(t, fan, topo.GatewayURL+"/v1/events"); code != http.StatusOK {
			t.Fatalf("GET /v1/events through a gateway with core1 down = %d %s", code, body)
		}
		if err := topo.Cores[0].Start(ctx); err != nil {
			t.Fatalf("restart core1: %v", err)
		}
		if err := topo.WaitServers(ctx, BackendCores, 2, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("gateways restarted", func(t *testing.T) {
		if err := topo.RestartGateways(ctx); err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, fan, topo.GatewayURL+"/v1/events"); code != http.StatusOK {
			t.Fatalf("GET /v1/events after RestartGateways = %d %s", code, body)
		}
	})

	// Patroni's postmasters are not its children (ppid 1): their pids are
	// read from the data directories
	var postmasters []int
	for _, m := range topo.PG.Members {
		if pid := postmasterPID(m.DataDir); pid > 0 {
			postmasters = append(postmasters, pid)
		}
	}
	if len(postmasters) != 3 {
		t.Errorf("postmasters %v; want 3", postmasters)
	}
	before := descendants(os.Getpid())
	if len(before) < 10 {
		t.Fatalf("only %d processes under the test before Stop: %v", len(before), before)
	}
	stopped = true
	began = time.Now()
	if err := topo.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(began).Round(10*time.Millisecond))
	if left := descendants(os.Getpid()); len(left) > 0 {
		t.Errorf("after Stop %d processes are left: %v", len(left), left)
	}
	for _, pid := range postmasters {
		if pgAlive(pid) {
			t.Errorf("postmaster %d is left after Stop", pid)
		}
	}
	if err := topo.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if !BlockFree(base, BlockSize) {
		t.Errorf("something still listens in %d-%d after Stop", base, base+BlockSize-1)
	}
}

// A Start that fails once the engines run (here: the payment simulator
// exits at once) stops them again and leaves no process behind.
func TestStartFailureLeavesNothing(t *testing.T) {
	needTopology(t)
	base, err := FreeBlock(BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, b := range []string{stack.Paysim, stack.Core, stack.Gateway} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\necho broken >&2\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = Start(ctx, Options{Dir: t.TempDir(), Base: base, Gateways: 1, Cores: 1, Bin: bin})
	if err == nil || !strings.Contains(err.Error(), "paysim") {
		t.Fatalf("Start with a payment simulator that exits = %v; want its failure", err)
	}
	if left := descendants(os.Getpid()); len(left) > 0 {
		t.Errorf("after a failed Start %d processes are left: %v", len(left), left)
	}
	if !BlockFree(base, BlockSize) {
		t.Errorf("something still listens in %d-%d after a failed Start", base, base+BlockSize-1)
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	return do(t, c, http.MethodGet, url)
}

func post(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	return do(t, c, http.MethodPost, url)
}

func do(t *testing.T, c *http.Client, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// descendants lists the live processes below pid ("pid name"), zombies
// left out.
func descendants(pid int) []string {
	children := map[int][]int{}
	names := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
		names[p] = s[strings.IndexByte(s, '(')+1 : i]
	}
	var out []string
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, fmt.Sprintf("%d %s", c, names[c]))
			walk(c)
		}
	}
	walk(pid)
	return out
}
