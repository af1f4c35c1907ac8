package danmaku_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a non-test function of the packages below
// may be, from its signature to its closing brace.
const maxFuncLines = 60

// TestFunctionLength keeps the functions of route, job and the send path short enough to
// read at once.
func TestFunctionLength(t *testing.T) {
	for _, dir := range []string{"route", "job", "internal/sendpath"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fs := token.NewFileSet()
			af, err := parser.ParseFile(fs, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fs.Position(fd.End()).Line - fs.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines, more than %d", fs.Position(fd.Pos()), fd.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}
