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
// []string (comma separated in env and flags). After loading, every struct in
// the tree that has a Validate() error method is validated; errors name the
// full dotted field path.
package config

import (
	"bytes"
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

	"gopkg.in/yaml.v3"
)

// EnvPrefix prefixes every environment variable read by Load.
const EnvPrefix = "DANMAKU_"

// FieldError is an invalid configuration value.
type FieldError struct {
	Field   string // dotted path, e.g. "job.window"
	Message string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Message }

// Invalid returns a FieldError for field (relative to the struct whose
// Validate method returns it; Load prefixes the path).
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validator is implemented by configuration sections that check themselves.
type Validator interface{ Validate() error }

// Options says where Load reads from.
type Options struct {
	// Name is used in flag usage output.
	Name string
	// Args are the command-line arguments without the program name. The flag
	// -config FILE names the YAML file; -help prints every knob.
	Args []string
	// Environ is the environment as KEY=VALUE strings; nil means none.
	Environ []string
	// Output receives usage text; nil means os.Stderr.
	Output io.Writer
}

// Load fills dst, a pointer to a struct already holding the defaults.
// It returns flag.ErrHelp when -help was given.
func Load(dst any, o Options) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return errors.New("config: Load needs a pointer to a struct")
	}
	var leaves []leaf
	collect(rv.Elem(), "", &leaves)

	fs := flag.NewFlagSet(o.Name, flag.ContinueOnError)
	if o.Output != nil {
		fs.SetOutput(o.Output)
	}
	file := fs.String("config", "", "YAML configuration file")
	flagged := map[string]string{}
	for _, l := range leaves {
		fs.Var(&flagValue{name: l.path, isBool: l.v.Kind() == reflect.Bool, seen: flagged},
			l.path, fmt.Sprintf("%s (env %s, default %q)", l.kind(), l.env(), l.String()))
	}
	if err := fs.Parse(o.Args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}
	if *file != "" {
		if err := loadFile(dst, *file); err != nil {
			return err
		}
	}
	env := map[string]string{}
	for _, kv := range o.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			env[k] = v
		}
	}
	for _, l := range leaves {
		if v, ok := env[l.env()]; ok {
			if err := l.set(v); err != nil {
				return &FieldError{Field: l.path, Message: fmt.Sprintf("env %s: %v", l.env(), err)}
			}
		}
	}
	for _, l := range leaves {
		if v, ok := flagged[l.path]; ok {
			if err := l.set(v); err != nil {
				return &FieldError{Field: l.path, Message: fmt.Sprintf("flag -%s: %v", l.path, err)}
			}
		}
	}
	return Validate(dst)
}

func loadFile(dst any, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: read %s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // a typo in a key is an error, not a silent default
	if err := dec.Decode(dst); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return nil
}

// Validate runs Validate on every section of v (a struct or pointer to one)
// that implements Validator, depth first, and prefixes field paths.
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
		if err := validate(v.Field(i), join(path, fieldName(f))); err != nil {
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

// Keys lists every configuration key with its env variable and current
// value, sorted; used for documentation and -help.
func Keys(v any) [][3]string {
	var leaves []leaf
	collect(reflect.ValueOf(v).Elem(), "", &leaves)
	out := make([][3]string, 0, len(leaves))
	for _, l := range leaves {
		out = append(out, [3]string{l.path, l.env(), l.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// flagValue records a flag's text; it is applied after the file and the
// environment so that flags win whatever their position.
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
	path string
	v    reflect.Value
}

var durationType = reflect.TypeOf(time.Duration(0))

func collect(v reflect.Value, path string, out *[]leaf) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := fieldName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			collect(fv, join(path, name), out)
			continue
		}
		*out = append(*out, leaf{path: join(path, name), v: fv})
	}
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

func (l leaf) kind() string {
	if l.v.Type() == durationType {
		return "duration"
	}
	if l.v.Kind() == reflect.Slice {
		return "list"
	}
	return l.v.Kind().String()
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
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported list type %s", v.Type())
		}
		var items []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				items = append(items, p)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}
