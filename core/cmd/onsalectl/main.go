// Command onsalectl is the operators' command line: it signs in, imports
// layouts, creates, edits, publishes, closes and cancels shows (following
// a cancellation's refunds), reads and sets a waiting room's dials, watches
// a sale's live numbers, reads sales and attendee lists, and checks an
// admit-key rotation. It speaks only HTTP, to a gateway's operators'
// listener (the console's address), which passes /operator/v1/* to the
// core: what the console does, a script can do.
//
//	onsalectl login -name asha            # password on stdin or ONSALE_PASSWORD
//	onsalectl shows list -status draft
//	onsalectl shows cancel 42 -reason "The artist is unwell." -yes
//	onsalectl -json shows sales 42
//
// Run onsalectl help, or onsalectl <command> -h, for every command.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// ctl is one run: where to, as whom, how to print.
type ctl struct {
	url, token, tokenFile string
	json                  bool
	in                    io.Reader
	out, errOut           io.Writer
	getenv                func(string) string
	client                *http.Client
}

// command is one row of the command table.
type command struct {
	name, args, help string
	run              func(c *ctl, fs *flag.FlagSet, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"login", "-name NAME", "sign in; the session token is kept in the token file (12 hours). The password is read from ONSALE_PASSWORD or the first line of stdin", cmdLogin},
		{"whoami", "", "the signed-in operator and what their role may do", get("/operator/v1/me")},
		{"operators list", "", "operator accounts (admins)", get("/operator/v1/operators")},
		{"operators add", "-name NAME -role admin|box_office|sale_desk [-display NAME]", "create an operator; the password is read from ONSALE_PASSWORD or stdin", cmdOperatorAdd},
		{"operators disable", "NAME", "disable an operator: their session stops at once", cmdOperatorDisable},
		{"layouts list", "", "venues' imported seat layouts", get("/operator/v1/layouts")},
		{"layouts import", "FILE [-name NAME]", "import a layout file (the seed's JSON format); its problems are listed by line and column, or section, row and seat", cmdLayoutImport},
		{"layouts show", "ID", "a layout and its document (sections, rows, seats)", getID("/operator/v1/layouts/")},
		{"shows list", "[-status S] [-city C] [-date YYYY-MM-DD] [-past]", "shows of every status (all pages), soonest first", cmdShowsList},
		{"shows show", "ID", "one show", getID("/operator/v1/events/")},
		{"shows create", "-title T -kind movie|concert -layout ID -start TIME [-start TIME...] -onsale TIME [-price BAND=PAISE...] [-max N] [-hold S]", "create draft shows; times are the venue's local time (2026-12-20T18:30) or RFC 3339", cmdShowsCreate},
		{"shows edit", "ID [-title T] [-start TIME] [-onsale TIME] [-price BAND=PAISE...] [-max N] [-hold S]", "edit a show until a minute before its sale opens", cmdShowsEdit},
		{"shows publish", "ID", "put a draft (or closed) show on sale at its on-sale time", post("publish")},
		{"shows close", "ID", "stop a show's sale; tickets sold stand", post("close")},
		{"shows cancel", "ID -yes [-reason TEXT] [-no-wait]", "cancel a show: every booking refunded, every ticket void, every holder told; follows the refunds until done", cmdShowsCancel},
		{"shows cancellation", "ID", "how far a cancellation has come", getSub("cancellation")},
		{"shows sales", "ID [-csv]", "sold, held, available, revenue and refunds per price band", cmdReport("sales")},
		{"shows attendees", "ID [-csv]", "the show's valid tickets, holders' contacts and check-ins", cmdReport("attendees")},
		{"shows audit", "ID", "the show's history: who changed what, when", getSub("audit")},
		{"dials get", "ID", "a show's waiting-room dials and live numbers", getID("/admin/v1/events/")},
		{"dials set", "ID NAME=VALUE...", "change dials (numbers, true/false, times, text); only those named change", cmdDialsSet},
		{"stats watch", "ID [-every 1s] [-n COUNT]", "the live numbers once a second: queued, admitted, active, what bounds the line, drain time", cmdStatsWatch},
		{"keys jwks", "[-gateways URL,URL...]", "the admit keys each gateway publishes (the first signs): check each step of a rotation on every gateway; exit 1 when they disagree", cmdKeysJWKS},
	}
}

// Main runs onsalectl with args and returns its exit status: 0, 1 for a
// refused or failed request, 2 for a usage error.
func Main(args []string, in io.Reader, out, errOut io.Writer, getenv func(string) string) int {
	c := &ctl{in: in, out: out, errOut: errOut, getenv: getenv, client: &http.Client{Timeout: 60 * time.Second}}
	fs := flag.NewFlagSet("onsalectl", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.url, "url", or(getenv("ONSALE_CTL_URL"), "http://127.0.0.1:8090"), "the gateway's operators' listener (the console's address; env ONSALE_CTL_URL)")
	fs.StringVar(&c.tokenFile, "token-file", or(getenv("ONSALE_CTL_TOKEN_FILE"), defaultTokenFile(getenv)), "where login keeps the session token (env ONSALE_CTL_TOKEN_FILE)")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON as it is (for scripts)")
	fs.Usage = func() { usage(errOut) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "help" {
		usage(out)
		if len(rest) == 0 {
			return 2
		}
		return 0
	}
	cmd, args := find(rest)
	if cmd == nil {
		fmt.Fprintf(errOut, "onsalectl: no command %q; onsalectl help lists them\n", strings.Join(rest, " "))
		return 2
	}
	c.token = getenv("ONSALE_OPERATOR_TOKEN")
	if c.token == "" && cmd.name != "login" {
		if b, err := os.ReadFile(c.tokenFile); err == nil {
			c.token = strings.TrimSpace(string(b))
		}
	}
	sub := flag.NewFlagSet("onsalectl "+cmd.name, flag.ContinueOnError)
	sub.SetOutput(errOut)
	sub.Usage = func() {
		fmt.Fprintf(errOut, "onsalectl %s %s\n  %s\n", cmd.name, cmd.args, cmd.help)
		sub.PrintDefaults()
	}
	if err := cmd.run(c, sub, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(errOut, "onsalectl %s: %v\nusage: onsalectl %s %s\n", cmd.name, err, cmd.name, cmd.args)
			return 2
		}
		fmt.Fprintf(errOut, "onsalectl %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "onsalectl [-url URL] [-json] COMMAND [ARGS]: the operators' command line (onsalectl COMMAND -h for one)")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, cmd := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name, cmd.help)
	}
	tw.Flush()
	fmt.Fprintln(w, "Sign in first (onsalectl login -name NAME), or give a session token in ONSALE_OPERATOR_TOKEN.")
}

// find picks the command whose name the args start with (the longest).
func find(args []string) (*command, []string) {
	var best *command
	n := 0
	for i := range commands {
		words := strings.Fields(commands[i].name)
		if len(words) <= len(args) && strings.Join(args[:len(words)], " ") == commands[i].name && len(words) > n {
			best, n = &commands[i], len(words)
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[n:]
}

type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func or(v, d string) string {
	if v != "" {
		return v
	}
	return d
}

func defaultTokenFile(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		dir = filepath.Join(getenv("HOME"), ".config")
	}
	return filepath.Join(dir, "onsalectl", "token")
}

// parse reads a subcommand's flags, interleaved with its positional
// arguments (onsalectl shows cancel 42 -yes and -yes 42 alike).
func parse(fs *flag.FlagSet, args []string, positional int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if positional >= 0 && len(pos) != positional {
		return nil, usagef("want %d argument(s), got %d", positional, len(pos))
	}
	return pos, nil
}

func id(s string) (string, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err != nil || n <= 0 {
		return "", usagef("%q is not an id", s)
	}
	return s, nil
}

// apiError is the API's problem answer (RFC 9457).
type apiError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	Problems  []struct{ Path, Message string }
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: %s", e.Status, e.Code, e.Message)
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %s: %s", p.Path, p.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// do sends one request and returns the answer's body, or *apiError.
func (c *ctl) do(method, path string, body any, contentType string) ([]byte, http.Header, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, nil, err
		}
		r = bytes.NewReader(j)
		contentType = "application/json"
	}
	req, err := http.NewRequest(method, strings.TrimRight(c.url, "/")+path, r)
	if err != nil {
		return nil, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode >= 400 {
		var p struct {
			Error, Message, RequestID string
			Problems                  []struct{ Path, Message string }
		}
		_ = json.Unmarshal(b, &p)
		e := &apiError{Status: resp.StatusCode, Code: p.Error, Message: p.Message, RequestID: or(p.RequestID, resp.Header.Get("X-Request-Id")), Problems: p.Problems}
		if resp.StatusCode == http.StatusUnauthorized {
			e.Message += " (sign in: onsalectl login -name NAME)"
		}
		return nil, nil, e
	}
	return b, resp.Header, nil
}

// show prints an answer: its JSON as it is with -json, else pretty.
func (c *ctl) show(b []byte, pretty func(v map[string]any)) error {
	if c.json || pretty == nil {
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", "  "); err != nil {
			_, err = c.out.Write(b)
			return err
		}
		buf.WriteByte('\n')
		_, err := buf.WriteTo(c.out)
		return err
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	pretty(v)
	return nil
}

func get(path string) func(c *ctl, fs *flag.FlagSet, args []string) error {
	return func(c *ctl, fs *flag.FlagSet, args []string) error {
		if _, err := parse(fs, args, 0); err != nil {
			return err
		}
		b, _, err := c.do("GET", path, nil, "")
		if err != nil {
			return err
		}
		return c.show(b, nil)
	}
}

// getID reads prefix+ID+suffix for the command's one argument, an id.
func getID(prefix string, suffix ...string) func(c *ctl, fs *flag.FlagSet, args []string) error {
	return func(c *ctl, fs *flag.FlagSet, args []string) error {
		n, err := oneID(fs, args)
		if err != nil {
			return err
		}
		b, _, err := c.do("GET", prefix+n+strings.Join(suffix, ""), nil, "")
		if err != nil {
			return err
		}
		return c.show(b, nil)
	}
}

// getSub reads a show's sub-resource (/operator/v1/events/ID/sub).
func getSub(sub string) func(c *ctl, fs *flag.FlagSet, args []string) error {
	return getID("/operator/v1/events/", "/"+sub)
}

// oneID reads a command's flags and its one argument, an id.
func oneID(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parse(fs, args, 1)
	if err != nil {
		return "", err
	}
	return id(pos[0])
}

func post(action string) func(c *ctl, fs *flag.FlagSet, args []string) error {
	return func(c *ctl, fs *flag.FlagSet, args []string) error {
		n, err := oneID(fs, args)
		if err != nil {
			return err
		}
		b, _, err := c.do("POST", "/operator/v1/events/"+n+"/"+action, nil, "")
		if err != nil {
			return err
		}
		return c.show(b, func(v map[string]any) { fmt.Fprintf(c.out, "show %s is %v\n", n, v["status"]) })
	}
}

// password reads a password from ONSALE_PASSWORD or stdin's first line.
func (c *ctl) password() (string, error) {
	if p := c.getenv("ONSALE_PASSWORD"); p != "" {
		return p, nil
	}
	line, err := bufio.NewReader(c.in).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		if err == nil || err == io.EOF {
			err = errors.New("no password: set ONSALE_PASSWORD or give it on stdin")
		}
		return "", err
	}
	return line, nil
}

func cmdLogin(c *ctl, fs *flag.FlagSet, args []string) error {
	name := fs.String("name", "", "the operator's name (required)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *name == "" {
		return usagef("-name is required")
	}
	pw, err := c.password()
	if err != nil {
		return err
	}
	b, _, err := c.do("POST", "/operator/v1/sessions", map[string]string{"name": *name, "password": pw}, "")
	if err != nil {
		return err
	}
	var s struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
		Operator  struct{ Name, Role string }
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.tokenFile), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(c.tokenFile, []byte(s.Token+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(c.tokenFile, 0o600); err != nil { // a file there before keeps its mode otherwise
		return err
	}
	if c.json {
		return json.NewEncoder(c.out).Encode(map[string]any{"operator": s.Operator.Name, "role": s.Operator.Role, "expires_at": s.ExpiresAt, "token_file": c.tokenFile})
	}
	fmt.Fprintf(c.out, "signed in as %s (%s) until %s; token in %s\n", s.Operator.Name, s.Operator.Role, s.ExpiresAt.Local().Format(time.DateTime), c.tokenFile)
	return nil
}

func cmdOperatorAdd(c *ctl, fs *flag.FlagSet, args []string) error {
	name := fs.String("name", "", "login name (required)")
	role := fs.String("role", "", "admin, box_office or sale_desk (required)")
	display := fs.String("display", "", "the name shown in the console")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *name == "" || *role == "" {
		return usagef("-name and -role are required")
	}
	pw, err := c.password()
	if err != nil {
		return err
	}
	b, _, err := c.do("POST", "/operator/v1/operators", map[string]string{"name": *name, "role": *role, "display_name": *display, "password": pw}, "")
	if err != nil {
		return err
	}
	return c.show(b, func(v map[string]any) { fmt.Fprintf(c.out, "operator %v created (%v)\n", v["name"], v["role"]) })
}

func cmdOperatorDisable(c *ctl, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	b, _, err := c.do("PATCH", "/operator/v1/operators/"+url.PathEscape(pos[0]), map[string]bool{"disabled": true}, "")
	if err != nil {
		return err
	}
	return c.show(b, func(v map[string]any) { fmt.Fprintf(c.out, "operator %v disabled\n", v["name"]) })
}

func cmdLayoutImport(c *ctl, fs *flag.FlagSet, args []string) error {
	name := fs.String("name", "standard", "the layout's name at its venue")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	b, _, err := c.do("POST", "/operator/v1/layouts?name="+url.QueryEscape(*name), doc, "application/json")
	if err != nil {
		return err
	}
	return c.show(b, func(v map[string]any) {
		venue, _ := v["venue"].(map[string]any)
		fmt.Fprintf(c.out, "layout %v imported: %v, %v, %q, %v places\n", v["id"], venue["name"], venue["city"], v["name"], v["capacity"])
	})
}

// showTable prints shows: id, status, start in the venue's zone, title, venue.
func (c *ctl) showTable(events []any) {
	tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSTARTS (VENUE TIME)\tTITLE\tVENUE")
	for _, e := range events {
		ev := e.(map[string]any)
		venue, _ := ev["venue"].(map[string]any)
		fmt.Fprintf(tw, "%.0f\t%v\t%s\t%v\t%v, %v\n", ev["id"], ev["status"], venueTime(fmt.Sprint(ev["starts_at"]), fmt.Sprint(venue["timezone"])), ev["name"], venue["name"], venue["city"])
	}
	tw.Flush()
}

func venueTime(iso, zone string) string {
	t, err := time.Parse(time.RFC3339, iso)
	if err != nil {
		return iso
	}
	if loc, err := time.LoadLocation(zone); err == nil {
		t = t.In(loc)
	}
	return t.Format("Mon 2 Jan 2006 15:04")
}

func cmdShowsList(c *ctl, fs *flag.FlagSet, args []string) error {
	status := fs.String("status", "", "draft, published, closed or cancelled (default: all)")
	city := fs.String("city", "", "only this city")
	date := fs.String("date", "", "only this day (YYYY-MM-DD, the venue's)")
	past := fs.Bool("past", false, "shows that have started, latest first")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	q := url.Values{"limit": {"200"}}
	for k, v := range map[string]string{"status": *status, "city": *city, "date": *date} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *past {
		q.Set("past", "true")
	}
	var all []any
	for {
		b, _, err := c.do("GET", "/operator/v1/events?"+q.Encode(), nil, "")
		if err != nil {
			return err
		}
		var page struct {
			Events []any  `json:"events"`
			Next   string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return err
		}
		all = append(all, page.Events...)
		if page.Next == "" {
			break
		}
		q.Set("cursor", page.Next)
	}
	if c.json {
		return json.NewEncoder(c.out).Encode(map[string]any{"events": all})
	}
	c.showTable(all)
	return nil
}

// multi is a repeatable flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func prices(ps multi) (map[string]int64, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := map[string]int64{}
	for _, p := range ps {
		band, v, ok := strings.Cut(p, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil, usagef("-price %q: want BAND=PAISE, e.g. PRIME=35000", p)
		}
		out[band] = n
	}
	return out, nil
}

func cmdShowsCreate(c *ctl, fs *flag.FlagSet, args []string) error {
	title := fs.String("title", "", "the show's title (required)")
	kind := fs.String("kind", "movie", "movie or concert")
	layout := fs.Int64("layout", 0, "the layout's id (required; onsalectl layouts list)")
	onsale := fs.String("onsale", "", "when the sale opens, venue time (required)")
	maxPer := fs.Int("max", 0, "tickets per account (default 6)")
	hold := fs.Int("hold", 0, "hold length in seconds (default 480)")
	var starts, ps multi
	fs.Var(&starts, "start", "a start time, venue time (repeat for several shows)")
	fs.Var(&ps, "price", "BAND=PAISE, a band's price (repeat; default: the layout's)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	pr, err := prices(ps)
	if err != nil {
		return err
	}
	body := map[string]any{"title": *title, "kind": *kind, "layout_id": *layout, "starts": []string(starts), "onsale_at": *onsale,
		"prices": pr, "max_per_account": *maxPer, "hold_seconds": *hold}
	b, _, err := c.do("POST", "/operator/v1/events", body, "")
	if err != nil {
		return err
	}
	return c.show(b, func(v map[string]any) {
		evs, _ := v["events"].([]any)
		fmt.Fprintf(c.out, "%d draft show(s) created; publish each when ready (onsalectl shows publish ID)\n", len(evs))
		c.showTable(evs)
	})
}

func cmdShowsEdit(c *ctl, fs *flag.FlagSet, args []string) error {
	title := fs.String("title", "", "a new title")
	start := fs.String("start", "", "a new start, venue time")
	onsale := fs.String("onsale", "", "a new on-sale time, venue time")
	maxPer := fs.Int("max", 0, "tickets per account")
	hold := fs.Int("hold", 0, "hold length in seconds")
	var ps multi
	fs.Var(&ps, "price", "BAND=PAISE (repeat)")
	n, err := oneID(fs, args)
	if err != nil {
		return err
	}
	patch := map[string]any{}
	for k, v := range map[string]string{"title": *title, "starts_at": *start, "onsale_at": *onsale} {
		if v != "" {
			patch[k] = v
		}
	}
	if *maxPer != 0 {
		patch["max_per_account"] = *maxPer
	}
	if *hold != 0 {
		patch["hold_seconds"] = *hold
	}
	pr, err := prices(ps)
	if err != nil {
		return err
	}
	if pr != nil {
		patch["prices"] = pr
	}
	b, _, err := c.do("PATCH", "/operator/v1/events/"+n, patch, "")
	if err != nil {
		return err
	}
	if *onsale != "" || *start != "" {
		// The waiting room keeps its own copy of the show's times (dials):
		// they follow the show's, as the room's defaults derive them
		// (gateway.DefaultDials: the pre-queue an hour before the sale, the
		// line closing at the start).
		var after struct {
			OnsaleAt time.Time `json:"onsale_at"`
			StartsAt time.Time `json:"starts_at"`
			Status   string    `json:"status"`
		}
		if err := json.Unmarshal(b, &after); err != nil {
			return err
		}
		if after.Status != "published" {
			return c.show(b, func(v map[string]any) { c.showTable([]any{v}) }) // a draft has no waiting room yet
		}
		follow := map[string]string{}
		if *onsale != "" {
			follow["onsale_at"] = after.OnsaleAt.UTC().Format(time.RFC3339)
			follow["prequeue_at"] = after.OnsaleAt.Add(-time.Hour).UTC().Format(time.RFC3339)
		}
		if *start != "" {
			follow["closes_at"] = after.StartsAt.UTC().Format(time.RFC3339)
		}
		if _, _, err := c.do("PATCH", "/admin/v1/events/"+n, follow, ""); err != nil {
			return fmt.Errorf("the show is saved, but the waiting room's times did not follow (set them with onsalectl dials set %s): %w", n, err)
		}
	}
	return c.show(b, func(v map[string]any) { c.showTable([]any{v}) })
}

func cmdShowsCancel(c *ctl, fs *flag.FlagSet, args []string) error {
	reason := fs.String("reason", "", "what ticket holders read")
	yes := fs.Bool("yes", false, "yes, cancel it: every booking is refunded (required)")
	noWait := fs.Bool("no-wait", false, "do not follow the refunds")
	timeout := fs.Duration("timeout", 30*time.Minute, "stop following after this long (the refunds go on)")
	n, err := oneID(fs, args)
	if err != nil {
		return err
	}
	if !*yes {
		return usagef("cancelling show %s refunds every booking and voids every ticket: add -yes", n)
	}
	b, _, err := c.do("POST", "/operator/v1/events/"+n+"/cancel", map[string]string{"reason": *reason}, "")
	if err != nil {
		return err
	}
	if *noWait {
		return c.show(b, func(v map[string]any) { c.progress(v["cancellation"].(map[string]any)) })
	}
	deadline, misses := time.Now().Add(*timeout), 0
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("show %s is cancelled; its refunds are still going after %s (onsalectl shows cancellation %s follows them)", n, *timeout, n)
		}
		b, _, err := c.do("GET", "/operator/v1/events/"+n+"/cancellation", nil, "")
		if err != nil {
			if misses++; misses < 5 { // the show is cancelled: a poll that fails is retried
				time.Sleep(2 * time.Second)
				continue
			}
			return fmt.Errorf("show %s is cancelled, but its progress cannot be read: %w", n, err)
		}
		misses = 0
		var p map[string]any
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		if c.json {
			c.out.Write(append(bytes.TrimSpace(b), '\n'))
		} else {
			c.progress(p)
		}
		if p["done"] == true {
			return nil
		}
		time.Sleep(time.Second)
	}
}

func (c *ctl) progress(p map[string]any) {
	fmt.Fprintf(c.out, "refunded %v of %v booking(s) (%v paise back, %v due); messages sent %v; jobs given up %v; done %v\n",
		p["refunded"], p["bookings"], p["refunded_paise"], p["due_paise"], p["notified"], p["dead_jobs"], p["done"])
}

func cmdReport(kind string) func(c *ctl, fs *flag.FlagSet, args []string) error {
	return func(c *ctl, fs *flag.FlagSet, args []string) error {
		csv := fs.Bool("csv", false, "CSV, as the console downloads it")
		n, err := oneID(fs, args)
		if err != nil {
			return err
		}
		path := "/operator/v1/events/" + n + "/" + kind
		if *csv {
			b, _, err := c.do("GET", path+"?format=csv", nil, "")
			if err != nil {
				return err
			}
			_, err = c.out.Write(b)
			return err
		}
		b, _, err := c.do("GET", path, nil, "")
		if err != nil {
			return err
		}
		if kind != "sales" {
			return c.show(b, nil)
		}
		return c.show(b, func(v map[string]any) {
			tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "BAND\tPRICE\tCAPACITY\tSOLD\tHELD\tAVAILABLE\tREVENUE\tREFUNDED\t")
			rows, _ := v["bands"].([]any)
			for _, r := range append(rows, v["total"]) {
				b := r.(map[string]any)
				fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%v\t%v\t\n", or(fmt.Sprint(b["code"]), "TOTAL"), b["price_paise"], b["capacity"], b["sold"],
					b["held"], b["available"], b["revenue_paise"], b["refunded"])
			}
			tw.Flush()
		})
	}
}

// dialValue reads a dial's value as the gateway's JSON wants it: a number,
// true/false, or text (times in RFC 3339).
func dialValue(v string) any {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return v
}

func cmdDialsSet(c *ctl, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("give a show's id and at least one NAME=VALUE")
	}
	n, err := id(pos[0])
	if err != nil {
		return err
	}
	patch := map[string]any{}
	for _, kv := range pos[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("%q: want NAME=VALUE, e.g. new_users_per_minute=3000", kv)
		}
		patch[k] = dialValue(v)
	}
	b, _, err := c.do("PATCH", "/admin/v1/events/"+n, patch, "")
	if err != nil {
		return err
	}
	return c.show(b, func(v map[string]any) {
		d, _ := v["dials"].(map[string]any)
		keys := make([]string, 0, len(patch))
		for k := range patch {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(c.out, "%s = %v\n", k, d[k])
		}
	})
}

func cmdStatsWatch(c *ctl, fs *flag.FlagSet, args []string) error {
	every := fs.Duration("every", time.Second, "how often")
	count := fs.Int("n", 0, "stop after this many samples (0: until interrupted)")
	n, err := oneID(fs, args)
	if err != nil {
		return err
	}
	for i := 0; *count == 0 || i < *count; i++ {
		if i > 0 {
			time.Sleep(*every)
		}
		b, _, err := c.do("GET", "/admin/v1/events/"+n, nil, "")
		if err != nil {
			return err
		}
		if c.json {
			c.out.Write(append(bytes.TrimSpace(b), '\n'))
			continue
		}
		var v struct {
			Dials struct {
				Paused            bool `json:"paused"`
				NewUsersPerMinute int  `json:"new_users_per_minute"`
			} `json:"dials"`
			Stats map[string]any `json:"stats"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		s := v.Stats
		fmt.Fprintf(c.out, "%s queued %v admitted/min %v active %v bound %v (%v/min) drains in %vs dial %d/min paused %v\n",
			time.Now().Format("15:04:05"), s["queued"], s["admitted_per_minute"], s["active"], s["bound"], s["bound_per_minute"],
			s["drain_seconds"], v.Dials.NewUsersPerMinute, v.Dials.Paused)
	}
	return nil
}

func cmdKeysJWKS(c *ctl, fs *flag.FlagSet, args []string) error {
	gateways := fs.String("gateways", "", "the gateways to compare, comma-separated base URLs (default: the one -url names); "+
		"after each step of a rotation every gateway must publish the same keys in the same order")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	urls := []string{c.url}
	if *gateways != "" {
		urls = nil
		for _, u := range strings.Split(*gateways, ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
		if len(urls) == 0 {
			return usagef("-gateways names no URL")
		}
	}
	type ring struct {
		URL  string   `json:"url"`
		Keys []string `json:"keys"` // key ids; the first signs new admit tokens
	}
	var rings []ring
	agree := true
	for _, u := range urls {
		one := *c
		one.url, one.token = strings.TrimSpace(u), "" // the keys are public
		b, _, err := one.do("GET", "/.well-known/jwks.json", nil, "")
		if err != nil {
			return fmt.Errorf("%s: %w", one.url, err)
		}
		var set struct {
			Keys []struct {
				Kid string `json:"kid"`
			} `json:"keys"`
		}
		if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) == 0 {
			return fmt.Errorf("%s: not a key set: %.200s", one.url, b)
		}
		r := ring{URL: one.url}
		for _, k := range set.Keys {
			r.Keys = append(r.Keys, k.Kid)
		}
		agree = agree && (len(rings) == 0 || slices.Equal(r.Keys, rings[0].Keys))
		rings = append(rings, r)
	}
	if c.json {
		b, _ := json.Marshal(map[string]any{"gateways": rings, "agree": agree})
		if err := c.show(b, nil); err != nil {
			return err
		}
	} else {
		for _, r := range rings {
			if len(rings) > 1 {
				fmt.Fprintln(c.out, r.URL)
			}
			for i, kid := range r.Keys {
				role := "verifies"
				if i == 0 {
					role = "signs new admit tokens"
				}
				fmt.Fprintf(c.out, "%s\t%s\n", kid, role)
			}
		}
	}
	if !agree {
		return errors.New("the gateways publish different keys: this step of the rotation is not done on every gateway yet (restart the rest, then check again)")
	}
	return nil
}
