// Package configtest keeps the README's configuration tables true: each
// binary's test renders its config struct and compares it with the README.
package configtest

import (
	"os"
	"strings"
	"testing"

	"github.com/onsale/onsale/shared/config"
)

// CheckReadme fails when the README at path, between the lines
// "<!-- config:NAME -->" and "<!-- /config:NAME -->", does not hold cfg's
// table as config.Markdown renders it. With ONSALE_UPDATE_README=1 it
// rewrites that section instead.
func CheckReadme(tb testing.TB, path, name string, cfg any) {
	tb.Helper()
	want, err := config.Markdown(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read README: %v", err)
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
	if os.Getenv("ONSALE_UPDATE_README") == "1" {
		if err := os.WriteFile(path, []byte(text[:i+len(open)]+want+text[j:]), 0o644); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("rewrote the %s section of %s", name, path)
		return
	}
	tb.Fatalf("the README's %s settings are stale; run the test with ONSALE_UPDATE_README=1 to rewrite them.\nREADME has:\n%s\nthe code declares:\n%s", name, got, want)
}
