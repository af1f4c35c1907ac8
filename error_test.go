package danmaku_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesDeclaredOnce: every error code a client can receive is a
// constant of error.go, and no other file of the module declares a code
// constant or variable (named code... or Code...) of its own.
func TestErrorCodesDeclaredOnce(t *testing.T) {
	codes := map[string]bool{}
	for _, v := range stringConsts(t, "error.go") {
		codes[v] = true
	}
	if !codes["invalid_argument"] || !codes["content_blocked"] || !codes["bad_room"] {
		t.Fatalf("error.go declares %v", codes)
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "web") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == "error.go" {
			return nil
		}
		for name, v := range stringConsts(t, path) {
			if strings.HasPrefix(strings.ToLower(name), "code") {
				t.Errorf("%s declares the error code %s = %q; declare it in error.go", path, name, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stringConsts returns the package-level constants and variables of file
// whose value is a string literal, by name.
func stringConsts(t *testing.T, file string) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, v := range vs.Values {
				if l, ok := v.(*ast.BasicLit); ok && l.Kind == token.STRING && i < len(vs.Names) {
					if s, err := strconv.Unquote(l.Value); err == nil {
						out[vs.Names[i].Name] = s
					}
				}
			}
		}
	}
	return out
}
