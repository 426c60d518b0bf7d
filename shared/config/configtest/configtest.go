// Package configtest keeps the documented configuration tables true: each
// binary's test renders its config struct and compares it with its table in
// docs/configuration.md.
package configtest

import (
	"os"
	"strings"
	"testing"

	"github.com/onsale/onsale/shared/config"
)

// UpdateEnv names the environment variable that, set to 1, makes CheckDoc
// rewrite a stale table instead of failing.
const UpdateEnv = "ONSALE_UPDATE_DOCS"

// CheckDoc fails when the Markdown document at path, between the lines
// "<!-- config:NAME -->" and "<!-- /config:NAME -->", does not hold cfg's
// table as config.Markdown renders it. With ONSALE_UPDATE_DOCS=1 it
// rewrites that section instead.
func CheckDoc(tb testing.TB, path, name string, cfg any) {
	tb.Helper()
	want, err := config.Markdown(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read the configuration document: %v", err)
	}
	text := string(raw)
	open, end := "<!-- config:"+name+" -->\n", "<!-- /config:"+name+" -->"
	i := strings.Index(text, open)
	j := strings.Index(text, end)
	if i < 0 || j < i {
		tb.Fatalf("%s has no section %q ... %q: add the two marker lines where %s's settings belong", path, strings.TrimSpace(open), end, name)
	}
	got := text[i+len(open) : j]
	if got == want {
		return
	}
	if update() {
		if err := os.WriteFile(path, []byte(text[:i+len(open)]+want+text[j:]), 0o644); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("rewrote the %s section of %s", name, path)
		return
	}
	tb.Fatalf("%s: the %s settings are stale; run the test with %s=1 to rewrite them.\n%s has:\n%s\nthe code declares:\n%s", path, name, UpdateEnv, path, got, want)
}

func update() bool {
	return os.Getenv(UpdateEnv) == "1"
}
