package faults_test

import (
	"fmt"
	"sort"
	"time"
)

// Growth bounds once the load is steady: the last samples of a process
// may exceed the highest of the first third of the steady run by at most
// this factor plus this slack.
var soakBounds = map[string][2]float64{
	"rss_bytes":  {1.5, 32 << 20},
	"goroutines": {1.25, 100},
	"open_fds":   {1.25, 40},
	"redis_keys": {2, 2000},
}

// perViewer is what a comet may hold per viewer connection beyond the
// bound: its socket and its reader's and writer's goroutines, with room
// for the registry work they bring. When a comet is killed or stalled its
// viewers move to the others and stay there, so a comet's descriptors and
// goroutines follow the viewers it holds (the sample's "viewers", its
// danmaku_comet_connections); what it gained in viewers since the steady
// max widens its bound by this much each, a leak does not.
var perViewer = map[string]float64{"goroutines": 3, "open_fds": 3}

// sample is one reading of one process (or of Redis: Proc "redis").
type sample struct {
	At    float64            `json:"at"` // seconds since the load started
	Proc  string             `json:"proc"`
	Value map[string]float64 `json:"value"`
}

// growth compares, per process and quantity, the median of the last three
// samples with the highest sample of the first third of the steady run
// (after a fifth of the run, at least a minute, of warm-up). It returns a
// line per process and quantity, and those over their bound.
func growth(samples []sample, dur time.Duration) (lines, over []string) {
	warm := max(dur.Seconds()/5, 60)
	third := warm + (dur.Seconds()-warm)/3
	series := map[string][]sample{}
	for _, s := range samples {
		if s.At >= warm {
			series[s.Proc] = append(series[s.Proc], s)
		}
	}
	procs := make([]string, 0, len(series))
	for p := range series {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	keys := make([]string, 0, len(soakBounds))
	for k := range soakBounds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, p := range procs {
		ss := series[p]
		if len(ss) < 4 {
			continue
		}
		for _, key := range keys {
			if _, ok := ss[0].Value[key]; !ok {
				continue
			}
			line, ok := bounded(ss, key, third)
			lines = append(lines, p+" "+line)
			if !ok {
				over = append(over, p+" "+line)
			}
		}
	}
	return lines, over
}

// bounded checks one quantity of one process's steady samples ss and
// describes it.
func bounded(ss []sample, key string, third float64) (string, bool) {
	var base sample
	for _, s := range ss {
		if s.At <= third && (base.Value == nil || s.Value[key] > base.Value[key]) {
			base = s
		}
	}
	end := median3(ss, key)
	b := soakBounds[key]
	bound := base.Value[key]*b[0] + b[1]
	line := fmt.Sprintf("%s: steady max %.0f, end %.0f", key, base.Value[key], end)
	if _, ok := base.Value["viewers"]; ok && perViewer[key] > 0 {
		gained := max(0, median3(ss, "viewers")-base.Value["viewers"])
		bound += perViewer[key] * gained
		line += fmt.Sprintf(", viewers %.0f then %.0f", base.Value["viewers"], median3(ss, "viewers"))
	}
	return line + fmt.Sprintf(", bound %.0f", bound), end <= bound
}

// median3 is the median of the last three samples' key.
func median3(ss []sample, key string) float64 {
	last := []float64{ss[len(ss)-3].Value[key], ss[len(ss)-2].Value[key], ss[len(ss)-1].Value[key]}
	sort.Float64s(last)
	return last[1]
}
