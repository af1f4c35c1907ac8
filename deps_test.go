package danmaku_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/danmaku/danmaku"

// depRule forbids the packages matched by from to depend, directly or
// through others, on the packages matched by to.
type depRule struct {
	from, to set
	why      string
}

// set matches import paths. Paths are relative to the module ("" is the
// root package); a path ending in "/..." also matches what is under it.
type set struct {
	paths  []string
	except []string // taken out of paths
	std    bool     // paths name standard or other modules' packages
}

func pkgs(paths ...string) set { return set{paths: paths} }

func (s set) but(paths ...string) set { s.except = paths; return s }

func ext(paths ...string) set { return set{paths: paths, std: true} }

func (s set) has(importPath string) bool {
	in := func(paths []string) bool {
		for _, p := range paths {
			full := p
			if !s.std {
				full = strings.TrimSuffix(module+"/"+p, "/")
			}
			if sub, ok := strings.CutSuffix(full, "/..."); ok {
				if importPath == sub || strings.HasPrefix(importPath, sub+"/") {
					return true
				}
			} else if importPath == full {
				return true
			}
		}
		return false
	}
	return in(s.paths) && !in(s.except)
}

var (
	roles = []string{"logic/...", "job/...", "comet/...", "archive/..."}
	// Test libraries and tools: never linked into a binary that ships. The
	// load tool's command is one of the tools.
	testsAndTools = []string{"internal/testkit/...", "internal/tools/...", "e2e/...", "cmd/loadtest"}
)

// The module's import rules: the domain at the root, route (Redis) under
// the roles, the roles apart, what tests and tools use apart from what
// ships.
var depRules = []depRule{
	{pkgs(""), pkgs("..."), "the root package holds the domain types every package shares; it imports nothing of ours"},
	{pkgs("route/..."), pkgs(roles...), "route is the Redis data model the roles use; it knows no role"},
	{pkgs("logic/..."), pkgs("job/...", "comet/..."), "a role imports no other role; what they share lives in the root, route or internal/"},
	{pkgs("job/..."), pkgs("logic/...", "comet/..."), "a role imports no other role; what they share lives in the root, route or internal/"},
	{pkgs("comet/..."), pkgs("logic/...", "job/..."), "a role imports no other role; what they share lives in the root, route or internal/"},
	{pkgs("...").but(testsAndTools...), pkgs(testsAndTools...), "production code never links test libraries or tools"},
	{pkgs("...").but(testsAndTools...), ext("testing"), "production code never links package testing"},
	{pkgs("cmd/job"), ext("github.com/gorilla/websocket/..."), "job pushes to comets over HTTP; it has no business with WebSockets"},
	{pkgs("cmd/job"), pkgs("web", "comet/..."), "job serves no page and holds no viewer"},
	{pkgs("archive/..."), pkgs("logic/...", "job/...", "comet/..."), "a role imports no other role; what they share lives in the root, route or internal/"},
	{pkgs("logic/...", "job/...", "comet/..."), pkgs("archive/..."), "a role imports no other role; the archive's database is vodstore"},
	{pkgs("cmd/archive"), ext("github.com/gorilla/websocket/..."), "the archive reads Kafka and writes a database; it holds no viewer"},
	{pkgs("cmd/archive"), pkgs("web", "comet/...", "route/..."), "the archive serves no page and needs no Redis"},
	{pkgs("vodstore/..."), pkgs(roles...), "vodstore is the archive's database; the archive writes it and logic reads it, it knows neither"},
	{pkgs("comet/..."), pkgs("web"), "the comet binary serves the page; package comet does not link its assets"},
	{pkgs("internal/sendpath/..."), pkgs(roles...), "the send path is shared by every role's door for comments; it knows no role"},
	{pkgs("client/..."), pkgs("...").but("", "client/..."), "the Go client is a public package other modules import: it uses the root's wire types and nothing else of ours"},
}

type listed struct {
	ImportPath string
	Deps       []string
}

// modulePackages lists every package of the module with its dependencies
// (not its tests').
func modulePackages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var all []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		all = append(all, p)
	}
	return all
}

// violation is a package that depends on what a rule forbids, or a rule
// that matches no package (a renamed package must not switch a rule off
// silently).
type violation struct {
	rule int // index in the rules checked
	text string
}

func violations(all []listed, rules []depRule) []violation {
	var out []violation
	for i, r := range rules {
		applied := false
		for _, p := range all {
			if !r.from.has(p.ImportPath) {
				continue
			}
			applied = true
			for _, d := range p.Deps {
				if r.to.has(d) {
					out = append(out, violation{i, p.ImportPath + " depends on " + d + ": " + r.why})
				}
			}
		}
		if !applied {
			out = append(out, violation{i, "no package matches " + strings.Join(r.from.paths, ", ") + ": " + r.why})
		}
	}
	return out
}

// TestDependencyRules checks the module's import graph, as go list sees
// it, against depRules.
func TestDependencyRules(t *testing.T) {
	all := modulePackages(t)
	if !slices.ContainsFunc(all, func(p listed) bool { return p.ImportPath == module+"/cmd/job" }) {
		t.Fatalf("go list listed %d packages, cmd/job not among them", len(all))
	}
	for _, v := range violations(all, depRules) {
		t.Error(v.text)
	}
}

// Every rule catches its break: a small graph that keeps the rules passes,
// and the same graph with one forbidden dependency per rule added fails
// each rule.
func TestDependencyRulesCatchBreaks(t *testing.T) {
	p := func(rel string) string { return strings.TrimSuffix(module+"/"+rel, "/") }
	graph := func(extra map[string][]string) []listed {
		g := []listed{
			{p(""), []string{"errors"}},
			{p("route"), []string{p(""), "github.com/redis/go-redis/v9"}},
			{p("logic"), []string{p(""), p("route")}},
			{p("job"), []string{p(""), p("route")}},
			{p("comet"), []string{p(""), p("route"), "github.com/gorilla/websocket"}},
			{p("cmd/job"), []string{p(""), p("job"), p("route")}},
			{p("cmd/loadtest"), []string{p("internal/tools/loadtest"), "testing"}},
			{p("internal/testkit/stack"), []string{p("route"), "testing"}},
			{p("web"), nil},
			{p("vodstore"), []string{p(""), "github.com/jackc/pgx/v5"}},
			{p("archive"), []string{p(""), p("vodstore")}},
			{p("cmd/archive"), []string{p("archive")}},
			{p("client"), []string{p(""), "github.com/gorilla/websocket"}},
			{p("internal/sendpath"), []string{p(""), p("route")}},
		}
		for i := range g {
			g[i].Deps = append(g[i].Deps, extra[g[i].ImportPath]...)
		}
		return g
	}
	if v := violations(graph(nil), depRules); len(v) != 0 {
		t.Fatalf("graph within the rules: %v", v)
	}
	v := violations(graph(map[string][]string{
		p(""):                  {p("internal/config")},
		p("route"):             {p("job")},
		p("logic"):             {p("comet")},
		p("job"):               {p("logic")},
		p("comet"):             {p("job"), p("web"), p("archive")},
		p("web"):               {p("internal/testkit"), "testing"},
		p("cmd/job"):           {"github.com/gorilla/websocket", p("web")},
		p("vodstore"):          {p("logic")},
		p("archive"):           {p("logic")},
		p("cmd/archive"):       {"github.com/gorilla/websocket", p("route")},
		p("client"):            {p("internal/auth")},
		p("internal/sendpath"): {p("logic")},
	}), depRules)
	for i, r := range depRules {
		if !slices.ContainsFunc(v, func(v violation) bool { return v.rule == i }) {
			t.Errorf("rule %d (%s) caught nothing; violations: %v", i, r.why, v)
		}
	}
}
