// Package config loads a role's configuration: defaults from the Go value,
// then a YAML file, then environment variables, then command-line flags, each
// layer overriding the one before. Every leaf field of the configuration
// struct is reachable by all three:
//
//	YAML   job: {window: 200ms}
//	env    DANMAKU_JOB_WINDOW=200ms
//	flag   -job.window=200ms
//
// Supported leaf kinds: string, bool, integers, float64, time.Duration and
// []string: comma separated in env and flags ("a,b"); in YAML a flow list
// ([a, b]), a block list (one "- a" per line) or the same "a,b" string.
// An environment variable that is set but empty counts as unset (with a
// warning naming it): it never clears a value of the file or the defaults.
// A value of the wrong kind is refused with the key, the source (file and
// line, env variable, flag) and the kind of value expected. Each leaf carries its
// one-line description in a `help` struct tag; -help prints it, and the
// configuration table of docs/config.md is generated from it.
//
// Parse fills the value; Validate runs every section's Validate method once
// and names the offending key by its full dotted path ("comet.secret").
// Load is Parse followed by Validate.
//
// A binary reads only its own sections. A file (or environment) may also
// hold the sections of the service's other binaries (ServiceSections): those
// are ignored, so one file can serve every role. Anything else that is
// unknown is an error in a file and a flag, and a warning in the
// environment, each naming the closest known key.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix prefixes every environment variable read by Load.
const EnvPrefix = "DANMAKU_"

// ServiceSections are the top-level sections of every binary of the
// service. A binary ignores the ones it does not have.
var ServiceSections = []string{"log", "redis", "kafka", "auth", "logic", "job", "comet", "page", "send"}

// FieldError is an invalid configuration value.
type FieldError struct {
	Field   string // dotted path, e.g. "job.window"
	Message string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Message }

// Invalid returns a FieldError for field (relative to the struct whose
// Validate method returns it; Validate prefixes the path).
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validator is implemented by configuration sections that check themselves.
type Validator interface{ Validate() error }

// Options says where Parse reads from.
type Options struct {
	// Name is used in usage output.
	Name string
	// Args are the command-line arguments without the program name. The flag
	// -config FILE names the YAML file; -help prints every knob.
	Args []string
	// Environ is the environment as KEY=VALUE strings; nil means none.
	Environ []string
	// Output receives the -help text and warnings; nil means os.Stderr.
	Output io.Writer
}

func (o Options) out() io.Writer {
	if o.Output == nil {
		return os.Stderr
	}
	return o.Output
}

// Load is Parse followed by Validate.
func Load(dst any, o Options) error {
	if err := Parse(dst, o); err != nil {
		return err
	}
	return Validate(dst)
}

// Parse fills dst, a pointer to a struct already holding the defaults, from
// the file, the environment and the flags, without validating the result.
// It returns flag.ErrHelp when -help was given (after printing the knobs).
// Environment variables with the DANMAKU_ prefix that name no knob are
// reported on Output as warnings.
func Parse(dst any, o Options) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return errors.New("config: Parse needs a pointer to a struct")
	}
	var leaves []leaf
	collect(rv.Elem(), "", "", &leaves)

	file, flagged, err := parseFlags(o, leaves)
	if err != nil {
		return err
	}
	if file != "" {
		if err := loadFile(rv.Elem(), file); err != nil {
			return err
		}
	}
	env := map[string]string{}
	for _, kv := range o.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			env[k] = v
		}
	}
	known := map[string]bool{}
	for _, l := range leaves {
		known[l.env()] = true
		v, ok := env[l.env()]
		switch {
		case !ok:
		case v == "":
			// An empty variable counts as unset: a shell line such as
			// `export A=$(cmd) B=$A` leaves B empty, and an empty secret
			// or address is never what was meant.
			fmt.Fprintf(o.out(), "config: warning: %s is set but empty; an empty variable counts as unset, so %s keeps its file or default value\n", l.env(), l.path)
		default:
			if err := l.set(v); err != nil {
				return sourceError(l, "env "+l.env(), v, err)
			}
		}
	}
	warnUnknownEnv(o.out(), env, known, leaves)
	for _, l := range leaves {
		if v, ok := flagged[l.path]; ok {
			if err := l.set(v); err != nil {
				return sourceError(l, "flag -"+l.path, v, err)
			}
		}
	}
	return nil
}

// sourceError names the key, where the bad value came from and what the
// key takes, in the words of the file's errors and without Go's parser
// messages: `job.window: env DANMAKU_JOB_WINDOW="soon": want a duration
// (200ms, 1s, 2m)`.
func sourceError(l leaf, source, value string, err error) error {
	msg := fmt.Sprintf("%s=%q: want %s", source, value, want(l.v.Type()))
	if errors.Is(err, strconv.ErrRange) {
		msg += ", this one is out of range"
	}
	return &FieldError{Field: l.path, Message: msg}
}

// parseFlags parses o.Args. It returns the -config file and the text of
// every knob flag given; they are applied after the file and the
// environment so that flags win whatever their position.
func parseFlags(o Options, leaves []leaf) (string, map[string]string, error) {
	fs := flag.NewFlagSet(o.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, -help is printed below
	file := fs.String("config", "", "YAML configuration file")
	flagged := map[string]string{}
	for _, l := range leaves {
		fs.Var(&flagValue{name: l.path, isBool: l.v.Kind() == reflect.Bool, seen: flagged}, l.path, l.help)
	}
	err := fs.Parse(o.Args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(o.out(), o.Name, leaves)
		return "", nil, err
	case err != nil:
		return "", nil, flagError(err, leaves)
	case fs.NArg() > 0:
		return "", nil, fmt.Errorf("config: unexpected argument %q (flags are -<section>.<key>=value; -help lists them)", fs.Arg(0))
	}
	return *file, flagged, nil
}

// flagError rewords the flag package's error for an unknown flag with the
// closest knob.
func flagError(err error, leaves []leaf) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return fmt.Errorf("config: %v", err)
	}
	paths := make([]string, len(leaves))
	for i, l := range leaves {
		paths[i] = l.path
	}
	msg := "config: unknown flag -" + name
	if best := closest(name, paths); best != "" {
		msg += " (did you mean -" + best + "?)"
	}
	return errors.New(msg + "; -help lists every knob")
}

// usage prints every knob with its kind, description, variable and
// default.
func usage(w io.Writer, name string, leaves []leaf) {
	if name == "" {
		name = "this binary"
	}
	fmt.Fprintf(w, "Usage of %s: flags -<section>.<key>=value, or DANMAKU_<SECTION>_<KEY> variables, or -config FILE (YAML).\n\n", name)
	fmt.Fprintf(w, "  -config FILE\n    \tYAML configuration file (configs/<binary>.yaml lists every knob)\n")
	for _, l := range leaves {
		fmt.Fprintf(w, "  -%s %s\n    \t%s (env %s, default %q)\n", l.path, l.kind(), l.help, l.env(), l.String())
	}
}

// warnUnknownEnv names DANMAKU_ variables that match no knob, with the
// closest known variable. Variables of another binary's section are
// expected (a shared environment) and pass silently.
func warnUnknownEnv(w io.Writer, env map[string]string, known map[string]bool, leaves []leaf) {
	var names []string
	for _, l := range leaves {
		names = append(names, l.env())
	}
	var unknown []string
	for k := range env {
		if !known[k] && !otherSectionVar(k, leaves) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		msg := "config: warning: unknown variable " + k + " is ignored"
		if best := closest(k, names); best != "" {
			msg += " (did you mean " + best + "?)"
		}
		fmt.Fprintln(w, msg)
	}
}

// otherSectionVar reports whether the variable belongs to a section of
// another binary of the service.
func otherSectionVar(k string, leaves []leaf) bool {
	own := map[string]bool{}
	for _, l := range leaves {
		own[strings.ToUpper(l.section)] = true
	}
	for _, s := range ServiceSections {
		up := strings.ToUpper(s)
		if !own[up] && strings.HasPrefix(k, EnvPrefix+up+"_") {
			return true
		}
	}
	return false
}

// Validate runs Validate on every section of v (a struct or pointer to one)
// that implements Validator, depth first, and prefixes field paths, so an
// error always names the section ("comet.secret").
func Validate(v any) error {
	return validate(reflect.ValueOf(v), "")
}

func validate(v reflect.Value, path string) error {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || v.Field(i).Kind() != reflect.Struct {
			continue
		}
		p := join(path, fieldName(f))
		if f.Anonymous && inline(f) {
			p = path // an inline struct's keys are the embedding one's
		}
		if err := validate(v.Field(i), p); err != nil {
			return err
		}
	}
	if v.CanAddr() {
		if val, ok := v.Addr().Interface().(Validator); ok {
			if err := val.Validate(); err != nil {
				var fe *FieldError
				if errors.As(err, &fe) {
					return &FieldError{Field: join(path, fe.Field), Message: fe.Message}
				}
				return &FieldError{Field: path, Message: err.Error()}
			}
		}
	}
	return nil
}

// Knob describes one configuration key.
type Knob struct {
	Key     string // dotted path, e.g. "job.window"
	Env     string // environment variable
	Default string // current value, as a flag would spell it
	Kind    string // string, bool, int, float64, duration, list
	Help    string // one-line description (the `help` tag)
}

// Knobs lists every key of v (a pointer to a configuration struct) with
// its current value, sorted by key; used for -help and documentation.
func Knobs(v any) []Knob {
	var leaves []leaf
	collect(reflect.ValueOf(v).Elem(), "", "", &leaves)
	out := make([]Knob, 0, len(leaves))
	for _, l := range leaves {
		out = append(out, Knob{Key: l.path, Env: l.env(), Default: l.String(), Kind: l.kind(), Help: l.help})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Keys lists every configuration key with its env variable and current
// value, sorted.
func Keys(v any) [][3]string {
	knobs := Knobs(v)
	out := make([][3]string, len(knobs))
	for i, k := range knobs {
		out[i] = [3]string{k.Key, k.Env, k.Default}
	}
	return out
}

// flagValue records a flag's text.
type flagValue struct {
	name   string
	isBool bool
	seen   map[string]string
}

func (f *flagValue) String() string   { return "" }
func (f *flagValue) IsBoolFlag() bool { return f.isBool }
func (f *flagValue) Set(s string) error {
	f.seen[f.name] = s
	return nil
}

type leaf struct {
	path    string
	section string
	help    string
	v       reflect.Value
}

var durationType = reflect.TypeOf(time.Duration(0))

func collect(v reflect.Value, path, section string, out *[]leaf) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := fieldName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		sec := section
		if sec == "" {
			sec = name
		}
		fv := v.Field(i)
		if f.Anonymous && fv.Kind() == reflect.Struct && inline(f) {
			// An embedded struct's keys belong to the embedding one, as
			// yaml's ",inline" has them.
			collect(fv, path, section, out)
			continue
		}
		if fv.Kind() == reflect.Struct {
			collect(fv, join(path, name), sec, out)
			continue
		}
		*out = append(*out, leaf{path: join(path, name), section: sec, help: f.Tag.Get("help"), v: fv})
	}
}

// inline reports whether an embedded field's keys sit at the embedding
// struct's level: no yaml name of its own, or the ",inline" option.
func inline(f reflect.StructField) bool {
	name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name == "" || strings.Contains(opts, "inline")
}

func fieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "." + b
}

func (l leaf) env() string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(l.path))
}

func (l leaf) kind() string { return kindOf(l.v.Type()) }

func kindOf(t reflect.Type) string {
	if t == durationType {
		return "duration"
	}
	if t.Kind() == reflect.Slice {
		return "list"
	}
	return t.Kind().String()
}

func (l leaf) String() string {
	if l.v.Kind() == reflect.Slice {
		parts := make([]string, l.v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(l.v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(l.v.Interface())
}

func (l leaf) set(s string) error {
	v := l.v
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetFloat(n)
	case reflect.Slice:
		return setList(v, splitList(s))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// setList sets v, a list of strings or integers, to items.
func setList(v reflect.Value, items []string) error {
	switch v.Type().Elem().Kind() {
	case reflect.String:
		v.Set(reflect.ValueOf(items))
	case reflect.Int:
		ns := make([]int, len(items))
		for i, it := range items {
			n, err := strconv.Atoi(it)
			if err != nil {
				return err
			}
			ns[i] = n
		}
		v.Set(reflect.ValueOf(ns))
	default:
		return fmt.Errorf("unsupported list type %s", v.Type())
	}
	return nil
}

// splitList splits "a, b" into its trimmed, non-empty items.
func splitList(s string) []string {
	var items []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			items = append(items, p)
		}
	}
	return items
}
