package config

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

type sample struct {
	Addr  string        `env:"T_ADDR" flag:"addr" default:"127.0.0.1:1" help:"listen address"`
	On    bool          `env:"T_ON" flag:"on" help:"switch"`
	N     int           `env:"T_N" flag:"n" default:"16" min:"1" max:"100" help:"a count"`
	Rate  float64       `env:"T_RATE" flag:"rate" default:"2.5" min:"0" help:"per second"`
	Every time.Duration `env:"T_EVERY" flag:"every" default:"30s" min:"100ms" max:"1h" help:"interval"`
	Mode  string        `env:"T_MODE" flag:"mode" default:"refund" oneof:"refund|keep" help:"policy"`
	Pick  string        `env:"T_PICK" flag:"pick" oneof:"a|b" help:"optional choice"`
	Level slog.Level    `env:"T_LEVEL" flag:"log-level" default:"info" help:"log level"`
	List  []string      `env:"T_LIST" flag:"list" help:"items"`
	Key   string        `env:"T_KEY" flag:"key" secret:"true" help:"api key"`
	DB    string        `env:"T_DB,T_DB_OLD" flag:"db" secret:"url" help:"database URL"`
	Hosts hostList      `env:"T_HOSTS" flag:"host" help:"repeatable"`
	Group struct {
		Inner int `env:"T_INNER" flag:"inner" default:"3" help:"grouped"`
	}
}

func (s *sample) Validate() error {
	if s.On && s.Key == "" {
		return errors.New("on needs a key")
	}
	return nil
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadOrder(t *testing.T) {
	var c sample
	err := load(&c, []string{"-n", "42", "-on", "-key", "k"}, env(map[string]string{
		"T_N": "7", "T_EVERY": "5s", "T_ON": "0", "T_ADDR": "", "T_LIST": "a, b,,c", "T_DB_OLD": "postgres://u:pw@h/db",
		"T_LEVEL": "warn", "T_INNER": "9", "T_PICK": "b",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.N != 42: // flag over env over default
		t.Errorf("N = %d; want 42 (the flag)", c.N)
	case c.Every != 5*time.Second:
		t.Errorf("Every = %v; want 5s (env over default)", c.Every)
	case c.Addr != "127.0.0.1:1":
		t.Errorf("Addr = %q; an empty variable must count as unset", c.Addr)
	case !c.On:
		t.Errorf("On = false; want true (the flag over T_ON=0)")
	case strings.Join(c.List, "|") != "a|b|c":
		t.Errorf("List = %q", c.List)
	case c.DB != "postgres://u:pw@h/db":
		t.Errorf("DB = %q; want the second env name's value", c.DB)
	case c.Level != slog.LevelWarn || c.Rate != 2.5 || c.Mode != "refund" || c.Group.Inner != 9 || c.Pick != "b":
		t.Errorf("config = %+v", c)
	}
}

// Every secret can come from a file named by its variable + _FILE (the
// final line break dropped), so it is in neither argv nor the environment;
// the plain variable and its _FILE both set is refused, as is a file that
// cannot be read or is empty. A setting that is not secret has no _FILE.
func TestLoadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key, db, empty := write("key", "s3cret\n"), write("db", "postgres://u:pw@h/db"), write("empty", "\n")
	var c sample
	if err := load(&c, nil, env(map[string]string{"T_KEY_FILE": key, "T_DB_OLD_FILE": db}), io.Discard); err != nil {
		t.Fatal(err)
	}
	if c.Key != "s3cret" || c.DB != "postgres://u:pw@h/db" {
		t.Errorf("Key, DB = %q, %q; want the files' contents", c.Key, c.DB)
	}
	c = sample{}
	if err := load(&c, nil, env(map[string]string{"T_ADDR_FILE": key}), io.Discard); err != nil || c.Addr != "127.0.0.1:1" {
		t.Errorf("T_ADDR_FILE set Addr = %q, %v; a setting that is not secret reads no file", c.Addr, err)
	}
	for name, m := range map[string]map[string]string{
		"both":    {"T_KEY": "x", "T_KEY_FILE": key},
		"missing": {"T_KEY_FILE": dir + "/nope"},
		"empty":   {"T_KEY_FILE": empty},
	} {
		var c sample
		if err := load(&c, nil, env(m), io.Discard); err == nil || !strings.Contains(err.Error(), "T_KEY") {
			t.Errorf("%s: load = %v; want an error naming T_KEY", name, err)
		}
	}
}

func TestLoadBools(t *testing.T) {
	for in, want := range map[string]bool{"1": true, "true": true, "TRUE": true, "t": true, "0": false, "false": false} {
		var c sample
		if err := load(&c, nil, env(map[string]string{"T_ON": in, "T_KEY": "k"}), io.Discard); err != nil || c.On != want {
			t.Errorf("T_ON=%s: On = %v, %v; want %v", in, c.On, err, want)
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string // in the error
	}{
		{"unparsable duration", map[string]string{"T_EVERY": "30"}, nil, "T_EVERY"},
		{"duration below min", map[string]string{"T_EVERY": "1ms"}, nil, "below the minimum 100ms"},
		{"duration above max", nil, []string{"-every", "2h"}, "above the maximum 1h"},
		{"int not a number", map[string]string{"T_N": "lots"}, nil, "T_N"},
		{"int below min", map[string]string{"T_N": "0"}, nil, "T_N / -n"},
		{"int above max", nil, []string{"-n=101"}, "above the maximum 100"},
		{"float not a number", map[string]string{"T_RATE": "fast"}, nil, "T_RATE"},
		{"float below min", map[string]string{"T_RATE": "-1"}, nil, "below the minimum 0"},
		{"bool typo", map[string]string{"T_ON": "yes please"}, nil, "T_ON"},
		{"not one of", map[string]string{"T_MODE": "burn"}, nil, "not one of refund, keep"},
		{"optional not one of", map[string]string{"T_PICK": "c"}, nil, "not one of a, b"},
		{"bad level", map[string]string{"T_LEVEL": "loud"}, nil, "T_LEVEL"},
		{"unknown flag", nil, []string{"-nope"}, "nope"},
		{"stray argument", nil, []string{"extra"}, "unexpected arguments"},
		{"validate", map[string]string{"T_ON": "1"}, nil, "on needs a key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c sample
			err := load(&c, tc.args, env(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var c sample
	var out bytes.Buffer
	err := load(&c, []string{"-h"}, env(nil), &out)
	if !IsHelp(err) {
		t.Fatalf("Load(-h) = %v; want ErrHelp", err)
	}
	if !strings.Contains(out.String(), "[env T_EVERY]") || !strings.Contains(out.String(), "100ms to 1h") {
		t.Fatalf("usage lacks env names or ranges:\n%s", out.String())
	}
}

func TestLogMasksSecrets(t *testing.T) {
	var c sample
	if err := load(&c, []string{"-key", "sk_live_123", "-db", "postgres://app:hunter2@db:5432/onsale"}, env(nil), io.Discard); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	Log(slog.New(slog.NewJSONHandler(&buf, nil)), &c)
	out := buf.String()
	if strings.Contains(out, "sk_live_123") || strings.Contains(out, "hunter2") {
		t.Fatalf("a secret reached the log: %s", out)
	}
	if !strings.Contains(out, `"key":"xxxxx"`) || !strings.Contains(out, "app:xxxxx@db:5432") || !strings.Contains(out, `"every":"30s"`) {
		t.Fatalf("log = %s", out)
	}
}

func TestMarkdown(t *testing.T) {
	md, err := Markdown(&sample{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `T_EVERY` | `-every` | `30s` | interval (100ms to 1h) |",
		"| `T_DB`, `T_DB_OLD` | `-db` |  | database URL; secret, masked in logs; or from the file `T_DB_FILE` names |",
		"| `T_MODE` | `-mode` | `refund` | policy (one of refund, keep) |",
		"| `T_INNER` | `-inner` | `3` | grouped |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestBadDeclaration(t *testing.T) {
	var c struct {
		X map[string]int `env:"T_X"`
	}
	if err := Load(&c, nil, env(nil)); err == nil {
		t.Fatal("Load accepted an unsupported field type")
	}
	if err := Load(c, nil, env(nil)); err == nil {
		t.Fatal("Load accepted a non-pointer")
	}
}

func TestUsageHidesSecrets(t *testing.T) {
	var c sample
	var out bytes.Buffer
	err := load(&c, []string{"-bogus"}, env(map[string]string{"T_KEY": "sk_live_env", "T_DB": "postgres://a:pw_env@h/d"}), &out)
	if err == nil {
		t.Fatal("Load(-bogus) succeeded")
	}
	if s := out.String(); strings.Contains(s, "sk_live_env") || strings.Contains(s, "pw_env") || !strings.Contains(s, "-key") {
		t.Fatalf("usage after a bad flag shows a secret from the environment (or no flags):\n%s", s)
	}
}

// hostList is a slice type that parses itself: Log and -h must show it
// through its own methods, not assume every slice is []string.
type hostList []string

func (h *hostList) UnmarshalText(b []byte) error {
	*h = append(*h, string(b))
	return nil
}

func TestTextSlice(t *testing.T) {
	var c sample
	var out bytes.Buffer
	if err := load(&c, []string{"-host", "a", "-host", "b"}, env(nil), &out); err != nil {
		t.Fatal(err)
	}
	if len(c.Hosts) != 2 || c.Hosts[1] != "b" {
		t.Fatalf("Hosts = %q; want [a b]", c.Hosts)
	}
	var buf bytes.Buffer
	Log(slog.New(slog.NewJSONHandler(&buf, nil)), &c) // must not panic
	if !strings.Contains(buf.String(), `"host":"[a b]"`) {
		t.Fatalf("log = %s", buf.String())
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:hunter2@db:5432/onsale":               "postgres://app:xxxxx@db:5432/onsale",
		"postgres://app@db/x?password=s3cret&sslmode=disable": "postgres://app@db/x?password=xxxxx&sslmode=disable",
		"postgres://app@db/x?sslpassword=s3cret":              "postgres://app@db/x?sslpassword=xxxxx",
		"https://sms.example/send?Token=s3cret&to=1":          "https://sms.example/send?Token=xxxxx&to=1",
		"host=db user=app password=s3cret":                    "xxxxx",
		"rediss://app:s3cret@h1:7001,h2:7002":                 "rediss://app:xxxxx@h1:7001,h2:7002",
		"http://127.0.0.1:8081":                               "http://127.0.0.1:8081",
		"redis://127.0.0.1:6379/0":                            "redis://127.0.0.1:6379/0",
		"host=db user=app":                                    "host=db user=app",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q; want %q", in, got, want)
		}
		if strings.Contains(redactURL(in), "s3cret") || strings.Contains(redactURL(in), "hunter2") {
			t.Errorf("redactURL(%q) kept the secret", in)
		}
	}
}

func TestStatus(t *testing.T) {
	saved := os.Args
	defer func() { os.Args = saved }()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, -1},
		{[]string{"-n", "5"}, -1},
		{[]string{"-n", "0"}, 2},
		{[]string{"-nope"}, 2},
		{[]string{"-h"}, 0},
	} {
		os.Args = append([]string{"cmd"}, tc.args...)
		var c sample
		if got := Status("cmd", &c); got != tc.want {
			t.Errorf("Status(%q) = %d; want %d", tc.args, got, tc.want)
		}
	}
}
