package loadtest

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportFiles writes the JSON and the chart of a small report and
// checks that the SVG is well-formed and carries both panels.
func TestReportFiles(t *testing.T) {
	rep := &Report{Scenario: "unit", Viewers: 10, Rooms: 1, Comets: 1, Rate: 5, Label: "window=100ms"}
	for i := int64(0); i < 5; i++ {
		rep.Series = append(rep.Series, SecPoint{T: i, Deliveries: uint64(100 * i), P50: 10, P90: 20, P99: 1500})
	}
	dir := t.TempDir()
	if err := rep.WriteJSON(filepath.Join(dir, "r.json")); err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(dir, "r.svg")
	if err := rep.WriteSVG(svg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
	}
	for _, want := range []string{"deliveries per second", "p99", "2000 ms", "<polyline"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}

// Commands are summed over the nodes read (INFO left out), each node's
// share kept when there is more than one.
func TestRedisDeltaNodes(t *testing.T) {
	before := map[string]map[string]int64{"a": {"evalsha": 10, "info": 3}, "b": {"hget": 5}}
	after := map[string]map[string]int64{"a": {"evalsha": 40, "info": 9}, "b": {"hget": 15, "evalsha": 20}}
	rs := redisDelta(before, after, 10)
	if rs.Commands != 60 || rs.PerMessage != 6 || rs.ByCommand["evalsha"] != 50 || rs.ByCommand["hget"] != 10 || rs.ByCommand["info"] != 0 {
		t.Fatalf("delta %+v", rs)
	}
	if rs.ByNode["a"] != 30 || rs.ByNode["b"] != 30 {
		t.Fatalf("per node %v", rs.ByNode)
	}
	if one := redisDelta(map[string]map[string]int64{"a": {}}, map[string]map[string]int64{"a": {"get": 2}}, 0); one.ByNode != nil || one.Commands != 2 {
		t.Fatalf("one node: %+v", one)
	}
}
