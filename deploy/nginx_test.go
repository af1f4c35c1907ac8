package deploy_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode"
)

// directive is one nginx directive: its name, arguments and, for a block
// directive (server, location, ...), the directives inside.
type directive struct {
	name  string
	args  []string
	block []*directive
	line  int
}

// find returns the directives named name among ds, not descending.
func find(ds []*directive, name string) []*directive {
	var out []*directive
	for _, d := range ds {
		if d.name == name {
			out = append(out, d)
		}
	}
	return out
}

// location returns the location block whose arguments are exactly args.
func location(ds []*directive, args ...string) *directive {
	for _, d := range find(ds, "location") {
		if strings.Join(d.args, " ") == strings.Join(args, " ") {
			return d
		}
	}
	return nil
}

// parseNginx reads an nginx configuration: words, quoted strings, '#'
// comments, ';' ending a directive and '{' '}' around a block.
func parseNginx(tb testing.TB, path string) []*directive {
	tb.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	toks, err := nginxTokens(string(src))
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	ds, rest, err := nginxBlock(toks)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	if len(rest) > 0 {
		tb.Fatalf("%s:%d: unexpected %q", path, rest[0].line, rest[0].text)
	}
	return ds
}

type token struct {
	text   string
	quoted bool
	line   int
}

func nginxTokens(src string) ([]token, error) {
	var toks []token
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case unicode.IsSpace(rune(c)):
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';':
			toks = append(toks, token{text: string(c), line: line})
			i++
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("line %d: unterminated string", line)
			}
			toks = append(toks, token{text: src[i+1 : j], quoted: true, line: line})
			line += strings.Count(src[i:j], "\n")
			i = j + 1
		default:
			j := i
			for j < len(src) && !unicode.IsSpace(rune(src[j])) && !strings.ContainsRune("{};", rune(src[j])) {
				j++
			}
			toks = append(toks, token{text: src[i:j], line: line})
			i = j
		}
	}
	return toks, nil
}

// nginxBlock parses directives until a '}' or the end, returning the tokens
// after the block's '}' (which it consumes).
func nginxBlock(toks []token) ([]*directive, []token, error) {
	var ds []*directive
	for len(toks) > 0 {
		t := toks[0]
		if !t.quoted && t.text == "}" {
			return ds, toks[1:], nil
		}
		d := &directive{name: t.text, line: t.line}
		toks = toks[1:]
		for {
			if len(toks) == 0 {
				return nil, nil, fmt.Errorf("line %d: %s has no ';' or block", d.line, d.name)
			}
			t := toks[0]
			toks = toks[1:]
			if !t.quoted && t.text == ";" {
				break
			}
			if !t.quoted && t.text == "{" {
				var err error
				if d.block, toks, err = nginxBlock(toks); err != nil {
					return nil, nil, err
				}
				break
			}
			if !t.quoted && t.text == "}" {
				return nil, nil, fmt.Errorf("line %d: unexpected }", t.line)
			}
			d.args = append(d.args, t.text)
		}
		ds = append(ds, d)
	}
	return ds, nil, nil
}
