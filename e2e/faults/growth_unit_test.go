package faults_test

import (
	"strings"
	"testing"
	"time"
)

// soakSamples builds a 30-minute soak's samples every 10 s of comets whose
// viewers at second at are viewers(comet, at), with fds and goroutines
// per viewer, plus leak(at) goroutines in comet1, and a job.
func soakSamples(viewers func(comet int, at float64) float64, leak func(at float64) float64) []sample {
	var out []sample
	for at := 0.0; at <= 1800; at += 10 {
		for c, name := range []string{"comet0", "comet1", "comet2"} {
			v := viewers(c, at)
			g := 40 + 2*v
			if c == 1 {
				g += leak(at)
			}
			out = append(out, sample{At: at, Proc: name, Value: map[string]float64{
				"rss_bytes": 25 << 20, "goroutines": g, "open_fds": 15 + 2*v, "viewers": v}})
		}
		out = append(out, sample{At: at, Proc: "job0", Value: map[string]float64{
			"rss_bytes": 40 << 20, "goroutines": 90, "open_fds": 35}})
	}
	return out
}

// Viewers that move from a killed comet to the others raise those comets'
// descriptors and goroutines without any leak: the growth check allows a
// comet what its gained viewers hold, and still finds a comet that leaks
// goroutines while its viewers stay.
func TestSoakGrowthFollowsViewers(t *testing.T) {
	moved := func(c int, at float64) float64 {
		// comet0 holds none in the first half (killed, its viewers went to
		// comet2), all of comet2's in the second (comet2 killed then).
		switch {
		case c == 1:
			return 16
		case at < 900 && c == 2, at >= 900 && c == 0:
			return 32
		}
		return 0
	}
	none := func(float64) float64 { return 0 }
	lines, over := growth(soakSamples(moved, none), 30*time.Minute)
	if len(over) > 0 {
		t.Errorf("viewers moving between comets taken for growth: %v", over)
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{"comet0 open_fds: steady max 15, end 79, viewers 0 then 32, bound 155",
		"comet2 open_fds: steady max 79, end 15, viewers 32 then 0, bound 139", "job0 goroutines: steady max 90, end 90, bound 212"} {
		if !strings.Contains(text, want) {
			t.Errorf("no line %q in:\n%s", want, text)
		}
	}

	leaking := func(at float64) float64 { return at / 6 } // 10 goroutines a minute
	_, over = growth(soakSamples(moved, leaking), 30*time.Minute)
	if len(over) != 1 || !strings.HasPrefix(over[0], "comet1 goroutines") {
		t.Errorf("a comet leaking 10 goroutines a minute: over %v, want comet1's goroutines", over)
	}
}
