// Package config is the one configuration mechanism of every onsale binary.
// A binary declares one struct; each field's tags say where its value comes
// from and what it may be:
//
//	type Config struct {
//		Addr  string        `env:"ONSALE_CORE_ADDR" flag:"addr" default:"127.0.0.1:8081" help:"listen address (host:port)"`
//		Sweep time.Duration `env:"ONSALE_SWEEP_INTERVAL" flag:"sweep-interval" default:"30s" min:"100ms" max:"1h" help:"time between sweeps"`
//		Key   string        `env:"ONSALE_PROVIDER_KEY" flag:"provider-key" secret:"true" help:"payment provider API key"`
//		Mode  string        `env:"ONSALE_LATE_POLICY" flag:"late-policy" default:"refund" oneof:"refund|keep" help:"..."`
//	}
//
// Load applies the defaults, then the environment, then the command line, and
// refuses to start on any value it cannot parse or that is out of range:
// a typo in a deploy must stop the binary, never silently become a default.
//
// Tags: env (one or more variable names, comma-separated, the first one set
// wins; an empty value counts as unset), flag (the flag name), default, help
// (say the unit), min and max (numbers and durations, inclusive), oneof
// (strings: the allowed values, |-separated; a field with no default may
// also be left empty), secret ("true": masked in logs;
// "url": only a URL's password is masked). Field types: string, bool (any
// strconv.ParseBool form: 1, true, 0, false...), int, int64, float64,
// time.Duration, []string (comma-separated), and any type whose pointer
// implements encoding.TextUnmarshaler (slog.Level, say). A field of struct
// type without tags is a group: its fields are read the same way. A config
// whose pointer has a Validate() error method is validated last, for rules
// across fields.
//
// Every secret (any secret tag) may instead be read from a file: its
// variable with FileSuffix (ONSALE_WEBHOOK_SECRET_FILE=/run/secrets/hook)
// names the file. Secrets belong in a file or the environment, never on
// the command line, which every local user can read in ps.
package config

import (
	"encoding"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Field describes one setting, as declared by its tags.
type Field struct {
	Name    string   // Go field path, e.g. "Payments.Key"
	Env     []string // environment variables, first wins
	Flag    string
	Default string
	Help    string
	Min     string
	Max     string
	OneOf   []string
	Secret  string // "", "true" or "url"
	Type    string // what the value is, for the help text

	v reflect.Value
}

// Fields returns the settings of cfg, a pointer to a config struct.
func Fields(cfg any) ([]Field, error) {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: want a pointer to a struct, got %T", cfg)
	}
	var out []Field
	if err := collect(rv.Elem(), "", &out); err != nil {
		return nil, err
	}
	return out, nil
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func collect(v reflect.Value, prefix string, out *[]Field) error {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		fv := v.Field(i)
		_, hasEnv := sf.Tag.Lookup("env")
		_, hasFlag := sf.Tag.Lookup("flag")
		if !hasEnv && !hasFlag {
			if sf.Type.Kind() == reflect.Struct && !reflect.PointerTo(sf.Type).Implements(textType) {
				if err := collect(fv, prefix+sf.Name+".", out); err != nil {
					return err
				}
			}
			continue
		}
		f := Field{Name: prefix + sf.Name, Flag: sf.Tag.Get("flag"), Default: sf.Tag.Get("default"),
			Help: sf.Tag.Get("help"), Min: sf.Tag.Get("min"), Max: sf.Tag.Get("max"), Secret: sf.Tag.Get("secret"), v: fv}
		for _, e := range strings.Split(sf.Tag.Get("env"), ",") {
			if e = strings.TrimSpace(e); e != "" {
				f.Env = append(f.Env, e)
			}
		}
		if o := sf.Tag.Get("oneof"); o != "" {
			f.OneOf = strings.Split(o, "|")
		}
		var err error
		if f.Type, err = typeName(fv); err != nil {
			return fmt.Errorf("config: field %s: %w", f.Name, err)
		}
		*out = append(*out, f)
	}
	return nil
}

func typeName(v reflect.Value) (string, error) {
	switch {
	case v.Type() == durationType:
		return "duration", nil
	case v.Addr().Type().Implements(textType):
		return "text", nil
	}
	switch v.Kind() {
	case reflect.String:
		return "string", nil
	case reflect.Bool:
		return "bool", nil
	case reflect.Int, reflect.Int64:
		return "int", nil
	case reflect.Float64:
		return "number", nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			return "list", nil
		}
	}
	return "", fmt.Errorf("unsupported type %s", v.Type())
}

// set parses s into the field.
func (f *Field) set(s string) error {
	v := f.v
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 500ms, 30s, 5m)", s)
		}
		v.SetInt(int64(d))
		return nil
	case v.Addr().Type().Implements(textType):
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return fmt.Errorf("%q: %v", s, err)
		}
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (use true or false, 1 or 0)", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		v.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(x)
	case reflect.Slice:
		var items []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		v.Set(reflect.ValueOf(items))
	}
	return nil
}

// check applies min, max and oneof to the field's current value.
func (f *Field) check() error {
	v := f.v
	if len(f.OneOf) > 0 && v.Kind() == reflect.String {
		s := v.String()
		for _, o := range f.OneOf {
			if s == o {
				return nil
			}
		}
		if s == "" && f.Default == "" {
			return nil // unset and optional
		}
		return fmt.Errorf("%q is not one of %s", s, strings.Join(f.OneOf, ", "))
	}
	for _, b := range []struct {
		bound string
		low   bool
	}{{f.Min, true}, {f.Max, false}} {
		if b.bound == "" {
			continue
		}
		var cmp int
		switch {
		case v.Type() == durationType:
			lim, err := time.ParseDuration(b.bound)
			if err != nil {
				return fmt.Errorf("bad bound %q in the declaration", b.bound)
			}
			cmp = compare(float64(v.Int()), float64(lim))
		case v.Kind() == reflect.Int || v.Kind() == reflect.Int64 || v.Kind() == reflect.Float64:
			lim, err := strconv.ParseFloat(b.bound, 64)
			if err != nil {
				return fmt.Errorf("bad bound %q in the declaration", b.bound)
			}
			x := v.Convert(reflect.TypeFor[float64]()).Float()
			cmp = compare(x, lim)
		default:
			return fmt.Errorf("min/max on a %s field", v.Type())
		}
		if b.low && cmp < 0 {
			return fmt.Errorf("%s is below the minimum %s", f.show(), b.bound)
		}
		if !b.low && cmp > 0 {
			return fmt.Errorf("%s is above the maximum %s", f.show(), b.bound)
		}
	}
	return nil
}

func compare(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// show is the field's current value as a person reads it.
func (f *Field) show() string {
	v := f.v
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	if m, ok := v.Addr().Interface().(encoding.TextMarshaler); ok {
		b, _ := m.MarshalText()
		return string(b)
	}
	if l, ok := v.Interface().([]string); ok {
		return strings.Join(l, ",")
	}
	return fmt.Sprint(v.Interface())
}

// masked is show with secrets hidden.
func (f *Field) masked() string {
	s := f.show()
	switch {
	case s == "":
		return ""
	case f.Secret == "true":
		return "xxxxx"
	case f.Secret == "url":
		return redactURL(s)
	}
	return s
}

// sensitiveParams are query parameters (of a DSN, a webhook URL) whose
// values are secrets.
var sensitiveParams = []string{"password", "sslpassword", "token", "secret", "key", "api_key", "apikey", "access_token", "sig", "signature"}

// redactURL masks a URL's password and the values of its sensitive query
// parameters; a key=value DSN that names a password is hidden whole.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		// A URL net/url cannot parse, such as a cluster's
		// redis://user:password@h1:1,h2:2: mask what is between the
		// user's colon and the last @.
		if scheme, rest, ok := strings.Cut(s, "://"); ok {
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
					return scheme + "://" + user + ":xxxxx" + rest[at:]
				}
			}
		}
		if strings.Contains(strings.ToLower(s), "password") {
			return "xxxxx"
		}
		return s
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			for _, p := range sensitiveParams {
				if strings.EqualFold(k, p) {
					q.Set(k, "xxxxx")
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// name is how an error names the setting: its first env var and its flag.
func (f *Field) name() string {
	var parts []string
	if len(f.Env) > 0 {
		parts = append(parts, f.Env[0])
	}
	if f.Flag != "" {
		parts = append(parts, "-"+f.Flag)
	}
	return strings.Join(parts, " / ")
}

// flagValue adapts a Field to flag.Value.
type flagValue struct{ f *Field }

func (fv flagValue) String() string {
	if fv.f == nil || !fv.f.v.IsValid() {
		return ""
	}
	return fv.f.masked()
}
func (fv flagValue) Set(s string) error { return fv.f.set(s) }
func (fv flagValue) IsBoolFlag() bool   { return fv.f.v.Kind() == reflect.Bool }

// Load fills cfg (a pointer to a config struct) from its defaults, then the
// environment (through lookup, normally os.LookupEnv), then args (the
// command line without the program name). It returns an error naming the
// setting and the value for anything unparsable or out of range, and the
// error of cfg's Validate method, if it has one. With -h or -help it
// writes the usage to stderr and returns flag.ErrHelp.
func Load(cfg any, args []string, lookup func(string) (string, bool)) error {
	return load(cfg, args, lookup, nil)
}

func load(cfg any, args []string, lookup func(string) (string, bool), usageOut io.Writer) error {
	fields, err := Fields(cfg)
	if err != nil {
		return err
	}
	for i := range fields {
		f := &fields[i]
		if f.Default != "" {
			if err := f.set(f.Default); err != nil {
				return fmt.Errorf("config: default of %s: %w", f.name(), err)
			}
		}
	}
	// Flags are declared before the environment is read, so the usage text
	// shows each declared default, never a value (or a secret) from the
	// environment.
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	if usageOut != nil {
		fs.SetOutput(usageOut)
	}
	for i := range fields {
		f := &fields[i]
		if f.Flag != "" {
			fs.Var(flagValue{f}, f.Flag, usageLine(f))
		}
	}
	for i := range fields {
		f := &fields[i]
		for _, e := range f.Env {
			s, from, err := envValue(f, e, lookup)
			if err != nil {
				return err
			}
			if s != "" {
				if err := f.set(s); err != nil {
					return fmt.Errorf("%s: %w", from, err)
				}
				break
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for i := range fields {
		if err := fields[i].check(); err != nil {
			return fmt.Errorf("%s: %w", fields[i].name(), err)
		}
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	return nil
}

// FileSuffix names, appended to a secret's variable, the variable that
// holds the path of a file with its value (ONSALE_QUEUE_SECRET_FILE): a
// secret given that way is in neither the process's command line nor its
// environment, both of which other local users and crash reports can read.
const FileSuffix = "_FILE"

// envValue is the value of the variable e for f, and the name it came
// from: for a secret, e or the file that e+FileSuffix names (its content
// without the final line break); both set is an error (which one was
// meant?), as is a file that cannot be read.
func envValue(f *Field, e string, lookup func(string) (string, bool)) (value, from string, err error) {
	s, set := lookup(e)
	if !set {
		s = ""
	}
	if f.Secret == "" {
		return s, e, nil
	}
	path, fileSet := lookup(e + FileSuffix)
	switch {
	case !fileSet || path == "":
		return s, e, nil
	case s != "":
		return "", "", fmt.Errorf("%s and %s%s are both set: give one", e, e, FileSuffix)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("%s%s: %w", e, FileSuffix, err)
	}
	value = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if value == "" {
		return "", "", fmt.Errorf("%s%s: %s is empty", e, FileSuffix, path)
	}
	return value, e + FileSuffix, nil
}

func usageLine(f *Field) string {
	s := f.Help
	if r := rangeText(f); r != "" {
		s += " (" + r + ")"
	}
	if len(f.Env) > 0 {
		s += " [env " + strings.Join(f.Env, ", ") + "]"
		if f.Secret != "" {
			s += " [or a file named by " + f.Env[0] + FileSuffix + "]"
		}
	}
	return s
}

func rangeText(f *Field) string {
	switch {
	case len(f.OneOf) > 0:
		return "one of " + strings.Join(f.OneOf, ", ")
	case f.Min != "" && f.Max != "":
		return f.Min + " to " + f.Max
	case f.Min != "":
		return "at least " + f.Min
	case f.Max != "":
		return "at most " + f.Max
	}
	return ""
}

// Log logs the effective configuration once, as one record with one
// attribute per setting (named by its flag), secrets masked.
func Log(log *slog.Logger, cfg any) {
	fields, err := Fields(cfg)
	if err != nil {
		log.Error("config", "err", err)
		return
	}
	attrs := make([]any, 0, len(fields))
	for i := range fields {
		f := &fields[i]
		key := f.Flag
		if key == "" {
			key = f.Env[0]
		}
		attrs = append(attrs, slog.String(key, f.masked()))
	}
	log.Info("config", attrs...)
}

// Markdown renders cfg's settings as a Markdown table, from the declaration
// alone (not the current values), for docs/configuration.md.
func Markdown(cfg any) (string, error) {
	fields, err := Fields(cfg)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| Environment | Flag | Default | Meaning |\n|---|---|---|---|\n")
	for i := range fields {
		f := &fields[i]
		env := make([]string, len(f.Env))
		for j, e := range f.Env {
			env[j] = "`" + e + "`"
		}
		flg, def := "", ""
		if f.Flag != "" {
			flg = "`-" + f.Flag + "`"
		}
		if f.Default != "" {
			def = "`" + f.Default + "`"
		}
		help := f.Help
		if r := rangeText(f); r != "" {
			help += " (" + r + ")"
		}
		if f.Secret != "" {
			help += "; secret, masked in logs"
			if len(f.Env) > 0 {
				help += "; or from the file `" + f.Env[0] + FileSuffix + "` names"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.Join(env, ", "), flg, def, strings.ReplaceAll(help, "|", `\|`))
	}
	return b.String(), nil
}

// Status loads cfg from the command line and the environment for a
// command's main, and says whether the command must stop: -1 to go on, 0
// after -h (the usage was printed), 2 for a setting it refused, after
// printing why to stderr, prefixed by name. Only main exits:
//
//	if code := config.Status("seed", &c); code >= 0 {
//		os.Exit(code)
//	}
func Status(name string, cfg any) int {
	err := Load(cfg, os.Args[1:], os.LookupEnv)
	switch {
	case err == nil:
		return -1
	case IsHelp(err):
		return 0
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	return 2
}

// ErrHelp is returned by Load when the command line asked for help.
var ErrHelp = flag.ErrHelp

// IsHelp reports whether err is a request for help (exit 0, not 2).
func IsHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
