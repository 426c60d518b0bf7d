package configtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsale/onsale/shared/config"
)

type cfg struct {
	Addr string `env:"T_ADDR" flag:"addr" default:":1" help:"listen address"`
}

// recorder captures a failure instead of failing the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(f string, a ...any) {
	r.failed = f
	panic(r)
}
func (r *recorder) Fatal(a ...any)      { r.Fatalf("fatal") }
func (r *recorder) Logf(string, ...any) {}

func check(t *testing.T, path string) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	CheckDoc(r, path, "demo", &cfg{})
	return ""
}

func TestCheckDoc(t *testing.T) {
	md, _ := config.Markdown(&cfg{})
	dir := t.TempDir()
	path := filepath.Join(dir, "configuration.md")
	write := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not the update variable of the environment the test runs in.
	t.Setenv(UpdateEnv, "")
	write("# x\n<!-- config:demo -->\n" + md + "<!-- /config:demo -->\n")
	if f := check(t, path); f != "" {
		t.Fatalf("a fresh document failed: %s", f)
	}
	stale := "# x\n<!-- config:demo -->\n| old |\n<!-- /config:demo -->\n"
	write(stale)
	if f := check(t, path); !strings.Contains(f, "stale") {
		t.Fatalf("a stale document passed (failure %q)", f)
	}
	write("# x\n")
	if f := check(t, path); !strings.Contains(f, "no section") {
		t.Fatalf("a document without the section passed (failure %q)", f)
	}
	write(stale)
	t.Setenv(UpdateEnv, "1")
	if f := check(t, path); f != "" {
		t.Fatalf("update failed: %s", f)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), md) || !strings.HasPrefix(string(b), "# x\n") {
		t.Fatalf("rewritten document = %q", b)
	}
}
