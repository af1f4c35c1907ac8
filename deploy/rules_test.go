package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// promtool returns the path of promtool, failing the test when it is
// missing (Debian: apt-get install prometheus).
func promtool(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		tb.Fatalf("promtool not found in PATH (Debian: apt-get install prometheus): %v", err)
	}
	return p
}

func runTool(tb testing.TB, dir string, name string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRules: promtool accepts the rules and their unit tests pass
// (each alert fires on the series that should fire it, and not before).
func TestAlertRules(t *testing.T) {
	pt := promtool(t)
	rules, _ := filepath.Glob("prometheus/rules/*.yml")
	if len(rules) == 0 {
		t.Fatal("no rule files in prometheus/rules")
	}
	runTool(t, ".", pt, append([]string{"check", "rules"}, rules...)...)
	out := runTool(t, "prometheus", pt, "test", "rules", "rules_test.yml")
	t.Logf("%s", out)
	// Every alert has a unit test.
	src, err := os.ReadFile("prometheus/rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ruleExprs(t) {
		if r.alert != "" && !strings.Contains(string(src), "alertname: "+r.alert+"\n") {
			t.Errorf("alert %s has no test in prometheus/rules_test.yml", r.alert)
		}
	}
}

// TestDashboardQueries: every query of the dashboard is PromQL that
// promtool accepts (checked as recording rules, with Grafana's
// $__rate_interval replaced by a duration).
func TestDashboardQueries(t *testing.T) {
	pt := promtool(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rs []rule
	for i, q := range dashboardExprs(t) {
		rs = append(rs, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: grafanaVars.Replace(q.expr)})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rs}}}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, ".", pt, "check", "rules", path)
}

// grafanaVars replaces the Grafana variables the dashboard uses with
// values Prometheus takes.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "${__rate_interval}", "1m")

// query is one PromQL expression and where it comes from.
type query struct {
	where string
	alert string // the alert's name, for rules
	expr  string
}

// dashboardExprs returns the queries of every panel of the dashboards.
func dashboardExprs(tb testing.TB) []query {
	tb.Helper()
	files, _ := filepath.Glob("grafana/dashboards/*.json")
	if len(files) == 0 {
		tb.Fatal("no dashboards in grafana/dashboards")
	}
	var qs []query
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string
				Type    string
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(src, &d); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			if p.Type != "row" && len(p.Targets) == 0 {
				tb.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, t := range p.Targets {
				qs = append(qs, query{where: fmt.Sprintf("%s panel %q", filepath.Base(f), p.Title), expr: t.Expr})
			}
		}
	}
	return qs
}

// ruleExprs returns the expressions of every alert and recording rule.
func ruleExprs(tb testing.TB) []query {
	tb.Helper()
	files, _ := filepath.Glob("prometheus/rules/*.yml")
	var qs []query
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var doc struct {
			Groups []struct {
				Rules []struct {
					Alert, Record, Expr string
				}
			}
		}
		if err := yaml.Unmarshal(src, &doc); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				qs = append(qs, query{where: filepath.Base(f) + " " + r.Alert + r.Record, alert: r.Alert, expr: r.Expr})
			}
		}
	}
	return qs
}
