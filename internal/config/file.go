package config

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// loadFile applies the YAML file at path to v. It walks the document key
// by key so every error names the key (as a dotted path) and its line:
// a value of the wrong type, and a key that is not known (with the closest
// known one). Sections of the service's other binaries are skipped.
func loadFile(v reflect.Value, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: read %s: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return syntaxError(path, b, err)
	}
	if len(doc.Content) == 0 {
		return nil // empty file
	}
	d := fileDecoder{path: path}
	return d.mapping(doc.Content[0], v, "")
}

// syntaxError reports a YAML syntax error at the line that has it. The
// parser names the line where the enclosing block began (a key indented one
// space too few under "job:" is reported at "job:"), so the first prefix of
// the file that fails with the same message gives the line itself.
func syntaxError(path string, b []byte, err error) error {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(msg, m[0])
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	for n := 1; n <= len(lines) && line > 0; n++ {
		var doc yaml.Node
		perr := yaml.Unmarshal(bytes.Join(lines[:n], nil), &doc)
		if perr != nil && strings.HasSuffix(perr.Error(), msg) {
			line = n
			break
		}
	}
	if line == 0 {
		return fmt.Errorf("config: %s: %s", path, strings.TrimPrefix(msg, "yaml: "))
	}
	return fmt.Errorf("config: %s line %d: %s (check this line's indentation and the one before)", path, line, msg)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

type fileDecoder struct{ path string }

func (d fileDecoder) errorf(n *yaml.Node, key, format string, args ...any) error {
	where := fmt.Sprintf("%s line %d", d.path, n.Line)
	if key != "" {
		where += ": " + key
	}
	return fmt.Errorf("config: %s: %s", where, fmt.Sprintf(format, args...))
}

// mapping applies the YAML mapping n to the struct v at path.
func (d fileDecoder) mapping(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // "section:" with nothing under it
	}
	if n.Kind != yaml.MappingNode {
		what := "the file"
		if path != "" {
			what = path
		}
		return d.errorf(n, "", "%s must be a mapping of keys, not %s", what, describe(n))
	}
	fields := map[string]reflect.Value{}
	var names []string
	keysOf(v, fields, &names)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			if path == "" && contains(ServiceSections, k.Value) {
				continue // a section of another binary
			}
			msg := "unknown key"
			if path == "" {
				msg = "unknown section"
			}
			if best := closest(k.Value, names); best != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", join(path, best))
			}
			return d.errorf(k, key, "%s", msg)
		}
		if f.Kind() == reflect.Struct {
			if err := d.mapping(val, f, key); err != nil {
				return err
			}
			continue
		}
		if err := d.leaf(val, f, key); err != nil {
			return err
		}
	}
	return nil
}

// leaf decodes one value into f; the error names the key and the kind of
// value it wants.
func (d fileDecoder) leaf(n *yaml.Node, f reflect.Value, key string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		f.Set(reflect.Zero(f.Type()))
		return nil
	}
	if n.Kind == yaml.ScalarNode && f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String {
		// "addrs: a:1, b:2" as env and flags spell a list.
		f.Set(reflect.ValueOf(splitList(n.Value)))
		return nil
	}
	tmp := reflect.New(f.Type())
	if err := n.Decode(tmp.Interface()); err != nil {
		return d.errorf(n, key, "want %s, got %s", want(f.Type()), describe(n))
	}
	f.Set(tmp.Elem())
	return nil
}

// want names the kind of value a field takes, as a YAML author thinks of it.
func want(t reflect.Type) string {
	switch kindOf(t) {
	case "duration":
		return "a duration (200ms, 1s, 2m)"
	case "list":
		return "a list ([a, b], a,b, or one \"- a\" per line)"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "float32", "float64":
		return "a number"
	}
	return "an integer"
}

// describe shows a node the way the file has it.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closest returns the candidate nearest to s by edit distance, or "" when
// none is near enough to be a likely typo.
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	ls := strings.ToLower(s)
	for _, c := range candidates {
		if d := editDistance(ls, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keysOf adds the keys of struct v to fields and names; an inline
// struct's keys are v's own.
func keysOf(v reflect.Value, fields map[string]reflect.Value, names *[]string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := fieldName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		if f.Anonymous && v.Field(i).Kind() == reflect.Struct && inline(f) {
			keysOf(v.Field(i), fields, names)
			continue
		}
		fields[name] = v.Field(i)
		*names = append(*names, name)
	}
}
