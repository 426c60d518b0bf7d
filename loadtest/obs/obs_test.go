// Package obs keeps the operators' dashboard and alert rules (deploy/grafana,
// deploy/prometheus) true to the code: every metric they read is one the
// core or the gateway declares, every dashboard query is valid PromQL, and
// the rules check and pass their unit tests (promtool, Debian's prometheus
// package: required under make test, skipped otherwise).
package obs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/onsale/onsale/shared/servicetest"
)

var root = filepath.Join("..", "..")

// declared is every metric name a Go file of the core or the gateway
// declares (a quoted onsale_ name).
func declared(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`"(onsale_[a-z0-9_]+)`)
	for _, dir := range []string{"core", "gateway"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, m := range re.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// used lists the onsale_ metric names an expression reads (histogram
// suffixes stripped).
func used(expr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`onsale_[a-z0-9_]+`).FindAllString(expr, -1) {
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			if strings.HasSuffix(m, suf) && strings.HasSuffix(strings.TrimSuffix(m, suf), "_seconds") {
				m = strings.TrimSuffix(m, suf)
			}
		}
		out = append(out, m)
	}
	return out
}

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record,omitempty"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestDashboardAndRulesReadDeclaredMetrics(t *testing.T) {
	have := declared(t)
	var exprs []string
	b, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "onsale-sale-day.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(d.Panels) < 10 {
		t.Errorf("the dashboard has %d panels", len(d.Panels))
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	var rules ruleFile
	rb, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "onsale.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rb, &rules); err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
			alerts++
			if !strings.Contains(string(runbook), "\n## "+r.Alert+"\n") || r.Annotations["runbook"] != "deploy/prometheus/runbook.md#"+strings.ToLower(r.Alert) {
				t.Errorf("alert %s: no runbook entry named ## %s, or its runbook annotation does not point to it", r.Alert, r.Alert)
			}
		}
	}
	var missing []string
	for _, e := range exprs {
		for _, name := range used(e) {
			if !have[name] && !strings.HasPrefix(name, "onsale_core_db_pool_") {
				missing = append(missing, name)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard and rules read metrics no service declares: %v", missing)
	}
	t.Logf("%d dashboard queries and %d alerts read declared metrics", len(exprs)-alerts, alerts)

	// Every dashboard query is valid PromQL: promtool checks them as the
	// expressions of recording rules.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		servicetest.Missing(t, "promtool is missing (Debian's prometheus package; make test installs it)")
	}
	type rec struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var recs []rec
	for i, p := range d.Panels {
		for j, tg := range p.Targets {
			recs = append(recs, rec{Record: "dashboard:panel" + string(rune('a'+i)) + string(rune('a'+j)), Expr: strings.ReplaceAll(tg.Expr, "$event", ".*")})
		}
	}
	out, _ := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recs}}})
	tmp := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", tmp}, {"check", "rules", "onsale.rules.yml"}, {"test", "rules", "onsale.rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Join(root, "deploy", "prometheus")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
}
