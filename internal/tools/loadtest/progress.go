package loadtest

import (
	"fmt"
	"io"
	"strings"

	"github.com/danmaku/danmaku/internal/telemetry"
)

// progress shows a run's phases on Config.Progress. On a terminal a bar is
// redrawn in place (\r); anywhere else (a log file, CI output) there are
// no bars and no carriage returns, only each phase's final state as one
// line when it ends.
type progress struct {
	w    io.Writer // nil: quiet
	tty  bool
	last string // the current phase's latest state, not yet written
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: w != nil && telemetry.Terminal(w)}
}

// bar records a phase's state: n of total done, and extra.
func (p *progress) bar(what string, n, total int, extra string) {
	if p.w == nil || total <= 0 {
		return
	}
	const width = 30
	k := min(width, n*width/total)
	if p.tty {
		fmt.Fprintf(p.w, "\r%-8s [%s%s] %d/%d %s   ", what, strings.Repeat("#", k), strings.Repeat(" ", width-k), n, total, extra)
		p.last = "\n" // the end of the line the bar is on
		return
	}
	p.last = fmt.Sprintf("%s %d/%d %s\n", what, n, total, extra)
}

// end ends the current phase: the bar's line, or its last state.
func (p *progress) end() {
	if p.w != nil && p.last != "" {
		io.WriteString(p.w, p.last)
	}
	p.last = ""
}

// printf writes a line of its own.
func (p *progress) printf(format string, a ...any) {
	if p.w != nil {
		p.end()
		fmt.Fprintf(p.w, format+"\n", a...)
	}
}
