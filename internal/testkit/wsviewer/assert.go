package wsviewer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// DeliveredOnce waits up to d until every viewer showed every id of ids,
// then marks tb failed unless each did, and unless no viewer received any
// message twice (duplicates it dropped count against it). The failure
// names, per viewer, how many ids are missing and how many duplicates it
// dropped.
func DeliveredOnce(tb testing.TB, d time.Duration, ids []string, vs ...*Viewer) {
	tb.Helper()
	delivered(tb, d, ids, vs, true)
}

// Delivered is DeliveredOnce for cases where a viewer may legitimately
// receive a message again (a history replayed after a lost timeline): it
// fails only on missing ids and logs the duplicates.
func Delivered(tb testing.TB, d time.Duration, ids []string, vs ...*Viewer) {
	tb.Helper()
	delivered(tb, d, ids, vs, false)
}

func delivered(tb testing.TB, d time.Duration, ids []string, vs []*Viewer, strict bool) {
	tb.Helper()
	if len(ids) == 0 {
		tb.Fatal("no accepted ids to check")
	}
	start := time.Now()
	err := testkit.Soon(d, func() error { return missing(ids, vs) })
	took := time.Since(start)
	var report []string
	bad, dupTotal := 0, 0
	pos := positions(vs)
	for i, v := range vs {
		miss := v.Missing(ids)
		dups, dupIDs := v.Duplicates()
		dupTotal += dups
		if len(miss) == 0 && (dups == 0 || !strict) {
			continue
		}
		bad++
		if len(report) < 20 {
			line := fmt.Sprintf("viewer %d of %s (%d connections): %d of %d missing, %d duplicates dropped",
				i, v.Room, v.Conns(), len(miss), len(ids), dups)
			if len(miss) > 0 {
				line += fmt.Sprintf("; first missing %v", miss[:min(3, len(miss))])
			}
			if dups > 0 {
				line += fmt.Sprintf("; duplicates %v", dupIDs)
			}
			if len(report) < 3 {
				line += "\n" + v.story(miss, pos)
			}
			report = append(report, line)
		}
	}
	if bad > 0 {
		tb.Errorf("%d of %d viewers did not show all %d messages exactly once (waited %v: %v):\n%s",
			bad, len(vs), len(ids), took.Round(time.Millisecond), err, strings.Join(report, "\n"))
		return
	}
	tb.Logf("%d viewers showed all %d messages after %v; %d duplicates dropped", len(vs), len(ids), took.Round(time.Millisecond), dupTotal)
}

// positions maps each id the viewers showed to its epoch and position.
func positions(vs []*Viewer) map[string]string {
	m := map[string]string{}
	for _, v := range vs {
		for _, sh := range v.Shown() {
			m[sh.ID] = fmt.Sprintf("%s/%d", sh.Epoch, sh.Pos)
		}
	}
	return m
}

// story describes what a viewer that missed ids went through: where the
// missing ids were (epoch/position, as other viewers showed them), its
// welcomes, and its msgs frames, runs of live frames merged.
func (v *Viewer) story(miss []string, pos map[string]string) string {
	var b strings.Builder
	if len(miss) > 0 {
		b.WriteString("    missing at")
		for _, id := range miss[:min(5, len(miss))] {
			p, ok := pos[id]
			if !ok {
				p = "unknown (no viewer showed it)"
			}
			fmt.Fprintf(&b, " %s", p)
		}
		b.WriteString("\n")
	}
	for _, w := range v.Welcomes() {
		fmt.Fprintf(&b, "    %s at %s\n", w, w.At.Format("15:04:05.000"))
	}
	b.WriteString("    frames:")
	fs := v.Frames()
	for i := 0; i < len(fs); {
		f, j := fs[i], i+1
		for j < len(fs) && !f.Replay && !fs[j].Replay && fs[j].Conn == f.Conn && fs[j].Epoch == f.Epoch && fs[j].First == fs[j-1].Last+1 {
			j++
		}
		kind := "live"
		if f.Replay {
			kind = "replay"
		}
		fmt.Fprintf(&b, " [conn %d %s %s %d-%d ×%d]", f.Conn, kind, f.Epoch, f.First, fs[j-1].Last, j-i)
		i = j
	}
	return b.String()
}

// missing reports the first viewer that has not shown every id.
func missing(ids []string, vs []*Viewer) error {
	for i, v := range vs {
		if n := len(v.Missing(ids)); n > 0 {
			return fmt.Errorf("viewer %d of %s misses %d of %d", i, v.Room, n, len(ids))
		}
	}
	return nil
}

// NoGaps marks tb failed when a viewer showed a message whose position is
// not one past the previous one of the same epoch, naming the first few.
func NoGaps(tb testing.TB, vs ...*Viewer) {
	tb.Helper()
	bad := 0
	var report []string
	for i, v := range vs {
		g := v.Gaps()
		if len(g) == 0 {
			continue
		}
		bad++
		if len(report) < 5 {
			report = append(report, fmt.Sprintf("viewer %d of %s: %d gaps, first %s", i, v.Room, len(g), g[0]))
		}
	}
	if bad > 0 {
		tb.Errorf("%d of %d viewers showed positions out of sequence:\n%s", bad, len(vs), strings.Join(report, "\n"))
	}
}
