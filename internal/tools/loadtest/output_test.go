package loadtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Off a terminal there are no bars and no carriage returns: each phase
// ends as one line.
func TestProgressOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	for i := 0; i <= 10; i++ {
		p.bar("connect", i, 10, "ok")
	}
	p.end()
	p.printf("ingest step %d", 1)
	if got, want := buf.String(), "connect 10/10 ok\ningest step 1\n"; got != want {
		t.Fatalf("progress off a terminal: %q, want %q", got, want)
	}
}

// The report writes tallies as totals with their parts, not Go maps.
func TestReportTallies(t *testing.T) {
	rep := &Report{Scenario: "unit", Viewers: 1,
		ViewerStats: ViewerStats{Failed: 3, Failures: map[string]int{"dial": 2, "handshake": 1}},
		Send:        SendStats{Rejected: map[string]int64{"429": 3, "503": 2}, Errors: map[string]int64{}},
		JobDropped:  map[string]float64{}}
	var buf bytes.Buffer
	rep.Print(&buf)
	out := buf.String()
	if strings.Contains(out, "map[") {
		t.Errorf("Go map notation in the report:\n%s", out)
	}
	for _, want := range []string{"failed 3 (dial: 2, handshake: 1)", "rejected 5 (429: 3, 503: 2) errors 0", "job dropped 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// Axis ticks keep their fraction: a quarter of 10k is 2.5k, not 2k.
func TestChartTicks(t *testing.T) {
	rep := &Report{Scenario: "unit"}
	for i := int64(0); i < 3; i++ {
		rep.Series = append(rep.Series, SecPoint{T: i, Deliveries: 9000, P99: 9})
	}
	path := filepath.Join(t.TempDir(), "r.svg")
	if err := rep.WriteSVG(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">2.5k<", ">7.5k<", ">2.5 ms<", ">7.5 ms<"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chart lacks the tick %s", want)
		}
	}
}
