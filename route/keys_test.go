package route

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestKeySchema checks the key table of doc.go against the keys the code
// builds: every builder of keys.go is called below with its parameters'
// names as ids, every key it builds is a row of the table, every row is
// built, and no other file of the package spells a key.
func TestKeySchema(t *testing.T) {
	ip, err := ipRateKey("192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	built := map[string][]string{
		"roomConnectionsKey":  {roomConnectionsKey("room")},
		"roomCometsKey":       {roomCometsKey("room")},
		"connectionInfoKey":   {connectionInfoKey("connId")},
		"userOnlineKey":       {userOnlineKey("user")},
		"cometKey":            {cometKey("cometId")},
		"cometConnectionsKey": {cometConnectionsKey("cometId")},
		"cometsIndexKey":      {cometsIndexKey},
		"auditKey":            {auditKey},
		"globalWordsKey":      {globalWordsKey},
		"sanctionsKey":        {sanctionsKey},
		"sendRulesKey":        {sendRulesKey},
		"reviewKey":           {reviewKey("room")},
		"reviewOrderKey":      {reviewOrderKey("room")},
		"reviewClaimKey":      {reviewClaimKey("room")},
		"heldKey":             {heldKey("room")},
		"heldMsgKey":          {heldMsgKey("room")},
		"reviewRetryKey":      {reviewRetryKey("room")},
		"roomSanctionsKey":    {roomSanctionsKey("room")},
		"processedKey":        {processedKey("room", "<msgId>")},
		"noticeProcessedKey":  {noticeProcessedKey("user", "<id>"), noticeProcessedKey("", "<id>")},
		"cooldownKey":         {cooldownKey("room")},
		"lockKey":             {lockKey("room")},
		"timelineKey":         {timelineKey("room")},
		"historyKey":          {historyKey("room")},
		"delsKey":             {delsKey("room")},
		"roomStateKey":        {roomStateKey("room")},
		"slowKey":             {slowKey("room", "<user>")},
		"uniqueKey":           {uniqueKey("room", "<digest>")},
		"banKey":              {banKey("room", "<user>")},
		"muteKey":             {muteKey("user", ""), muteKey("user", "<room>")},
		"rateKey":             {rateKey("user")},
		"highRateKey":         {highRateKey("room")},
		"ipRateKey":           {strings.Replace(ip, "192.0.2.1", "addr", 1)},
	}

	builders := keyBuilders(t)
	for _, name := range builders {
		if _, ok := built[name]; !ok {
			t.Errorf("keys.go declares %s, which this test does not build", name)
		}
	}
	var keys []string
	for name, ks := range built {
		if !slices.Contains(builders, name) {
			t.Errorf("%s is not declared in keys.go", name)
		}
		keys = append(keys, ks...)
	}

	table := docKeys(t)
	for _, k := range keys {
		if !slices.Contains(table, k) {
			t.Errorf("the code builds %s, missing from doc.go's table", k)
		}
	}
	for _, k := range table {
		if !slices.Contains(keys, k) {
			t.Errorf("doc.go's table lists %s, which no builder makes", k)
		}
	}

	// A key spelled in another file escapes this check.
	keyLit := regexp.MustCompile(`^[a-z]+:[a-z:]*(\{|$)`)
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if f == "keys.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, lit := range stringLits(t, f) {
			if keyLit.MatchString(lit) {
				t.Errorf("%s spells the key %q; build it in keys.go", f, lit)
			}
		}
	}
}

// keyBuilders lists the functions and constants of keys.go whose names end
// in Key.
func keyBuilders(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "keys.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if strings.HasSuffix(d.Name.Name, "Key") {
				out = append(out, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				if vs, ok := sp.(*ast.ValueSpec); ok {
					for _, n := range vs.Names {
						if strings.HasSuffix(n.Name, "Key") {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// docKeys returns the first column of the table in doc.go's Keys section.
func docKeys(t *testing.T) []string {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "// # Keys\n")
	if !ok {
		t.Fatal("doc.go has no Keys section")
	}
	sec, _, _ = strings.Cut(sec, "\n// #")
	var out []string
	for _, line := range strings.Split(sec, "\n") {
		row, ok := strings.CutPrefix(line, "//\t")
		if !ok || strings.HasPrefix(row, " ") {
			continue // prose, or a row's continuation
		}
		if f := strings.Fields(row); len(f) > 0 && f[0] != "key" {
			out = append(out, f[0])
		}
	}
	if len(out) == 0 {
		t.Fatal("doc.go's Keys section has no table")
	}
	return out
}

// stringLits returns the string literals of file.
func stringLits(t *testing.T, file string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if s, err := strconv.Unquote(l.Value); err == nil {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}
