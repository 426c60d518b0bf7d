// Package docs keeps the repository's Markdown documentation true to itself:
// every relative link in README.md, docs/ and deploy/ (every Markdown file
// of the repository) names a file or directory that exists, every #anchor a
// heading of its target (by GitHub's rules), and the README lists every
// document in docs/.
package docs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var root = filepath.Join("..", "..")

func TestLinks(t *testing.T) {
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	// Guard against checking nothing: a walk that misses these is broken.
	for _, want := range []string{"README.md", "docs/api.md", "docs/configuration.md", "deploy/README.md"} {
		if !slices.Contains(files, want) {
			t.Fatalf("markdownFiles(%q) = %v; want it to hold %s", root, files, want)
		}
	}
	for _, p := range checkLinks(root, files) {
		t.Error(p)
	}
}

// TestReadmeListsDocs: every document in docs/ is linked from the README
// (its Documentation list), so none is left where nobody finds it.
func TestReadmeListsDocs(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatalf("no docs/*.md under %s", root)
	}
	linked := map[string]bool{}
	for _, l := range parse(t, "README.md").links {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.ToSlash(filepath.Clean(path))] = true
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		if !linked[filepath.ToSlash(rel)] {
			t.Errorf("README.md does not link %s; add it to the Documentation list", filepath.ToSlash(rel))
		}
	}
}

// TestLinksControl shows the checker failing: a tree with one good link of
// each kind and one broken link of each kind reports exactly the broken ones.
func TestLinksControl(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", strings.Join([]string{
		"# Top",
		"## The flash sale (`make demo`)",
		"good: [a](docs/a.md) [b](docs/a.md#how-a-hold-stays-correct) [c](#the-flash-sale-make-demo)",
		"good: [d](docs/a.md#rules-1) [e](deploy/) [f](https://example.com/x#y) [g](<docs/a.md>)",
		"good: [h](docs/a.md \"title\") [i](deploy/x.go#L10) [j][ref] `[k](not/a/link.md)`",
		"[ref]: docs/a.md#seat_ids-and-rows",
		"```",
		"[l](inside/a/fence.md)",
		"```",
		"bad: [m](docs/missing.md) [n](docs/a.md#no-such-heading) [o](#nowhere)",
		"[bad]: docs/gone.md",
		"",
	}, "\n"))
	write("docs/a.md", "# A\n\n## How a hold stays correct\n\n## Rules\n\n### Rules\n\n## Seat_ids and rows!\n\nback: [top](../README.md#top)\n")
	write("deploy/x.go", "package x\n")
	files, err := markdownFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "docs/a.md"}; !slices.Equal(files, want) {
		t.Fatalf("markdownFiles = %v; want %v", files, want)
	}
	got := checkLinks(dir, files)
	want := []string{
		`README.md:10: link "docs/missing.md": no such file`,
		`README.md:10: link "docs/a.md#no-such-heading": no heading "no-such-heading" in docs/a.md`,
		`README.md:10: link "#nowhere": no heading "nowhere" in README.md`,
		`README.md:11: link "docs/gone.md": no such file`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checkLinks =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"The flash sale (`make demo`)", "the-flash-sale-make-demo"},
		{"API (core)", "api-core"},
		{"seed, ticketverify, admitkey", "seed-ticketverify-admitkey"},
		{"How a payment is never lost", "how-a-payment-is-never-lost"},
		{"Machines and sizing", "machines-and-sizing"},
		{"**Bold** and [a link](x.md)", "bold-and-a-link"},
		{"snake_case and hy-phen", "snake_case-and-hy-phen"},
		{"Ünïcode: café", "ünïcode-café"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q; want %q", tc.heading, got, tc.want)
		}
	}
}

// markdownFiles lists every .md file under dir (slash-separated, relative
// to dir), skipping hidden directories (.git, .run) and bin/.
func markdownFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// checkLinks returns one line per broken relative link in files (relative
// to dir): a target that does not exist, or an anchor that is no heading
// of the Markdown file it points into.
func checkLinks(dir string, files []string) []string {
	docs := map[string]*doc{} // by slash path relative to dir
	load := func(name string) (*doc, error) {
		if d, ok := docs[name]; ok {
			return d, nil
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		d := parseDoc(string(b))
		docs[name] = d
		return d, nil
	}
	var problems []string
	for _, name := range files {
		d, err := load(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		for _, l := range d.links {
			if msg := checkLink(dir, name, l.target, load); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", name, l.line, l.target, msg))
			}
		}
	}
	return problems
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// checkLink says what is wrong with target, a link in the file from, or ""
// when nothing is. Absolute URLs are not followed.
func checkLink(dir, from, target string, load func(string) (*doc, error)) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	path, _, _ = strings.Cut(path, "?")
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	name := from
	if path != "" {
		if strings.HasPrefix(path, "/") { // GitHub: from the repository's root
			name = filepath.ToSlash(filepath.Clean(strings.TrimPrefix(path, "/")))
		} else {
			name = filepath.ToSlash(filepath.Join(filepath.Dir(from), path))
		}
		if name == ".." || strings.HasPrefix(name, "../") {
			return "outside the repository"
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			return "no such file"
		}
	}
	if anchor == "" || !strings.HasSuffix(name, ".md") {
		return "" // anchors into code (#L10) are GitHub's line numbers, not headings
	}
	d, err := load(name)
	if err != nil {
		return err.Error()
	}
	if a, err := url.PathUnescape(anchor); err == nil {
		anchor = a
	}
	if !d.anchors[strings.ToLower(anchor)] {
		return fmt.Sprintf("no heading %q in %s", anchor, name)
	}
	return ""
}

type link struct {
	line   int
	target string
}

// doc is what the checker needs of a Markdown file: its links and the
// anchors its headings make.
type doc struct {
	links   []link
	anchors map[string]bool
}

var (
	fence    = regexp.MustCompile("^ {0,3}(```|~~~)")
	atx      = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setext   = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	codeSpan = regexp.MustCompile("(`+)[^`]+?(`+)")
	// [text](target) and ![alt](target): the target bare or in <>, with an
	// optional title.
	inline = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^()\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// [label]: target
	refDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// HTML anchors a document may name: <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`<a\s[^>]*(?:name|id)="([^"]+)"`)
)

func parse(tb testing.TB, name string) *doc {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		tb.Fatal(err)
	}
	return parseDoc(string(b))
}

// parseDoc reads a Markdown file's links and anchors, leaving out fenced
// code blocks and code spans.
func parseDoc(text string) *doc {
	d := &doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	addHeading := func(h string) {
		s := slug(h)
		if n := seen[s]; n > 0 {
			d.anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			d.anchors[s] = true
		}
		seen[s]++
	}
	inFence, prevPara := false, ""
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence, prevPara = !inFence, ""
			continue
		}
		if inFence {
			continue
		}
		if m := atx.FindStringSubmatch(line); m != nil {
			addHeading(m[1])
			prevPara = ""
		} else if setext.MatchString(line) && prevPara != "" {
			addHeading(prevPara)
			prevPara = ""
			continue
		} else if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "|") {
			prevPara = ""
		} else {
			prevPara = strings.TrimSpace(line)
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.anchors[strings.ToLower(m[1])] = true
		}
		plain := stripCode(line)
		for _, m := range inline.FindAllStringSubmatch(plain, -1) {
			d.links = append(d.links, link{i + 1, strings.Trim(m[1], "<>")})
		}
		if m := refDef.FindStringSubmatch(plain); m != nil {
			d.links = append(d.links, link{i + 1, strings.Trim(m[1], "<>")})
		}
	}
	return d
}

// stripCode blanks the code spans of a line: a link inside one is text.
func stripCode(line string) string {
	return codeSpan.ReplaceAllStringFunc(line, func(s string) string {
		return strings.Repeat(" ", len(s))
	})
}

var (
	mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	tag    = regexp.MustCompile(`<[^>]+>`)
)

// slug is the anchor GitHub gives a heading: its text as rendered (links
// and images by their text, code spans without backticks, no emphasis
// markers or HTML tags), lower-cased, every character but letters, marks,
// digits, '-', '_' and spaces dropped, spaces turned to '-'.
func slug(heading string) string {
	h := mdLink.ReplaceAllString(heading, "$1")
	h = tag.ReplaceAllString(h, "")
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
