// Package loadtest drives the hot-room load test: WebSocket viewers spread
// over rooms and comets (in this process or in re-executed worker
// processes), open-loop senders posting to logic, and an exact account of
// what every viewer (or a sample of them) received. cmd/loadtest is its
// command line.
//
// Each message carries its room sequence and send time in its content,
// "lt:<seq>:<unixnano>". Viewers find these by scanning the frame bytes,
// without decoding the JSON, and set one bit per sequence, so a second copy
// is a duplicate and a missing bit of an accepted message is a loss.
//
// Viewers can drop during the run (-jitter, -churn) or be cut by the server
// and resume with their room's epoch and last position (resume.go); a
// viewer's sessions share one bitmap, so a resumed viewer is held to the
// same promise as one that never left: every accepted message exactly once.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/danmaku/danmaku/internal/tools/promtext"
)

// Step is one stage of the ingest mode: an open-loop rate or a closed loop
// with Conc goroutines.
type Step struct {
	Rate float64
	Conc int
	Dur  time.Duration
}

func (s Step) String() string {
	if s.Conc > 0 {
		return fmt.Sprintf("closed c=%d %s", s.Conc, s.Dur)
	}
	return fmt.Sprintf("open %.0f/s %s", s.Rate, s.Dur)
}

// Proc names a server process to watch through /proc.
type Proc struct {
	Name string
	PID  string
}

// Config is one load-test run.
type Config struct {
	Scenario string
	Comets   []string // comet public addresses host:port
	LogicURL string

	Viewers    int
	Rooms      int
	RoomPrefix string
	Hot        float64 // share of viewers in room 0 (when Zipf is 0)
	Zipf       float64 // Zipf exponent over the rooms; 0: hot share

	ConnRate   float64 // connections per second, all processes together
	Dialers    int
	PerProcess int // most viewers in one process; more go to workers
	// InProcessMax: up to this many viewers share the senders' process;
	// more run in worker processes even below PerProcess, so thousands of
	// busy reader goroutines cannot delay the open-loop schedule.
	InProcessMax  int
	WorkerProfile string // CPU profile file prefix for worker processes
	SourceIPs     int    // 0: one per 20,000 viewers of a process
	SourceBase    int    // first 127.0.0.x source address
	ExactSample   int    // 0: account every viewer exactly; else at least this many
	DialTimeout   time.Duration

	Rate     float64 // messages per second
	Duration time.Duration
	// UserRate and BroadcastRate are notices per second over Duration,
	// posted with AdminSecret (see notice.go); either makes every viewer
	// a user of its own.
	UserRate      float64
	BroadcastRate float64
	AdminSecret   string
	// TokenSecret is the comets' auth.hmac_secret: notice runs' viewers
	// prove their user with a token it signs.
	TokenSecret string
	Senders     int
	Users       int
	Timeout     time.Duration
	PerPost     int           // messages per request
	Settle      time.Duration // pause between ramp and sending
	Idle        time.Duration // idle measurement before sending
	Drain       time.Duration // wait after the last send before counting
	MaxDrain    time.Duration // then keep waiting while deliveries still arrive, up to this
	Warmup      time.Duration // bound of the end-to-end check before the ramp; 0: skip
	Steps       []Step        // ingest mode: replaces Rate/Duration

	// Drops during sending (see PoolSpec): every viewer once for about
	// Jitter; a Churn share of them ChurnDrops times, away up to
	// ChurnAway. Reconnects: resumes after a cut by the server or the
	// network. Seed: 0 draws one.
	Jitter     time.Duration
	Churn      float64
	ChurnDrops int
	ChurnAway  time.Duration
	Reconnects int
	// Standby: the last Standby comets get viewers only by failover.
	Standby int
	Seed    uint64

	Procs      []Proc
	JobMetrics []string // job /metrics URLs
	RedisAddr  string   // for INFO commandstats: one address, or a cluster's masters comma separated

	// Kill names a process of Procs to kill (SIGKILL) KillAfter into
	// sending: a comet crash under load.
	Kill      string
	KillAfter time.Duration

	TargetP99     time.Duration // reported as met or missed
	TargetLiveP99 time.Duration // the same for messages of live frames only
	TargetDPS     float64
	TargetHighP99 time.Duration // the high-priority lane's p99

	// Tiers is the viewers' mix of density caps; HighRate is
	// high-priority messages per second over Duration (posted with
	// AdminSecret); Compress makes viewers offer permessage-deflate
	// (density.go).
	Tiers    []TierShare
	HighRate float64
	Compress bool
	// SSE makes viewers read GET /sse streams (the fallback transport)
	// instead of WebSockets.
	SSE bool
	// SendSocket, when set (ws://host:port/ws of a comet with
	// comet.socket_send), sends the messages as send frames on sockets
	// instead of POSTs to LogicURL.
	SendSocket string
	// CentrifugoKey makes the senders publish to a Centrifugo server at
	// LogicURL with this HTTP API key instead (SendSpec.CentrifugoKey).
	CentrifugoKey string

	Exe      string    // this binary, for worker processes
	Progress io.Writer // progress bar; nil: quiet
}

// Run performs one load test and returns its report.
func Run(ctx context.Context, c Config) (*Report, error) {
	if c.Viewers > 0 && len(c.Comets) == 0 {
		return nil, errors.New("no comet addresses")
	}
	var victim int
	if c.Kill != "" {
		for _, p := range c.Procs {
			if p.Name == c.Kill {
				victim, _ = strconv.Atoi(p.PID)
			}
		}
		if victim <= 0 {
			return nil, fmt.Errorf("kill %q: no such -pid process", c.Kill)
		}
	}
	if c.Standby < 0 || (c.Standby > 0 && c.Standby >= len(c.Comets)) {
		return nil, fmt.Errorf("standby %d: must leave at least one of the %d comets for the first dials", c.Standby, len(c.Comets))
	}
	if c.LogicURL == "" {
		return nil, errors.New("no logic URL")
	}
	if c.RoomPrefix == "" {
		c.RoomPrefix = "lt-room-"
	}
	if c.PerProcess <= 0 {
		c.PerProcess = 15000
	}
	if c.ConnRate <= 0 {
		c.ConnRate = 2000
	}
	if c.Drain <= 0 {
		c.Drain = 3 * time.Second
	}
	if c.MaxDrain < c.Drain {
		c.MaxDrain = c.Drain
	}
	if c.HighRate > 0 && c.AdminSecret == "" {
		return nil, errNoHighSender
	}
	layout, err := NewLayout(c.RoomPrefix, c.Rooms, c.Viewers, c.Hot, c.Zipf)
	if err != nil {
		return nil, err
	}
	var userBase int64
	if c.UserRate > 0 || c.BroadcastRate > 0 {
		userBase = userBaseFor(time.Now())
	}
	rep := &Report{Scenario: c.Scenario, Started: time.Now().UTC(), Viewers: c.Viewers, Rooms: c.Rooms,
		Comets: len(c.Comets), Rate: c.Rate, DurationS: c.Duration.Seconds(), Cores: runtime.NumCPU()}

	exactEvery := 1
	if c.ExactSample > 0 && c.ExactSample < c.Viewers {
		exactEvery = c.Viewers / c.ExactSample
	}
	nproc := 1
	if c.Viewers > c.PerProcess {
		nproc = (c.Viewers + c.PerProcess - 1) / c.PerProcess
	}
	remote := nproc > 1 || c.Viewers > c.InProcessMax
	perProc := (c.Viewers + nproc - 1) / nproc
	srcIPs := c.SourceIPs
	if srcIPs <= 0 {
		srcIPs = (perProc + 19999) / 20000
	}
	if c.SourceBase <= 0 {
		c.SourceBase = 1
	}
	if exactEvery == 1 {
		rep.Accounting = fmt.Sprintf("exact: every message of every viewer (%d)", c.Viewers)
	} else {
		rep.Accounting = fmt.Sprintf("exact for a sample of 1 in %d viewers (%d); frames, bytes and messages counted for the rest",
			exactEvery, (c.Viewers+exactEvery-1)/exactEvery)
	}
	rep.Processes = nproc
	if c.Churn < 0 || c.Churn > 1 {
		return nil, errors.New("churn share must be within 0..1")
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.ChurnDrops <= 0 {
		c.ChurnDrops = 2
	}
	if c.ChurnAway <= 0 {
		c.ChurnAway = time.Second
	}
	sendFor := c.Duration
	if len(c.Steps) > 0 {
		sendFor = 0
		for _, st := range c.Steps {
			sendFor += st.Dur
		}
	}

	if c.Warmup > 0 && len(c.Comets) > 0 {
		if err := warmup(ctx, c.Comets, c.LogicURL, c.Warmup); err != nil {
			return nil, err
		}
	}
	before := sampleAll(c.Procs)
	var workers []worker
	for k := 0; k < nproc && c.Viewers > 0; k++ {
		spec := PoolSpec{Targets: c.Comets, Rooms: layout.Rooms, RoomViewers: layout.Viewers,
			From: k * perProc, To: min((k+1)*perProc, c.Viewers), Rate: c.ConnRate / float64(nproc),
			Dialers: c.Dialers, SourceIPs: srcIPs, SourceBase: c.SourceBase, ExactEvery: exactEvery,
			DialTimeout: c.DialTimeout, Jitter: c.Jitter, Churn: c.Churn, ChurnDrops: c.ChurnDrops,
			ChurnAway: c.ChurnAway, SendFor: sendFor, Seed: c.Seed, Reconnects: c.Reconnects,
			Standby: c.Standby, UserBase: userBase, TokenSecret: c.TokenSecret,
			Tiers: c.Tiers, High: c.HighRate > 0, Compress: c.Compress, SSE: c.SSE}
		if c.WorkerProfile != "" {
			spec.CPUProfile = fmt.Sprintf("%s.worker%d", c.WorkerProfile, k)
		}
		if !remote {
			workers = append(workers, startLocal(ctx, spec))
			continue
		}
		exe := c.Exe
		if exe == "" {
			if exe, err = os.Executable(); err != nil {
				return nil, err
			}
		}
		w, err := startRemote(exe, spec)
		if err != nil {
			for _, w := range workers {
				w.finish()
			}
			return nil, err
		}
		workers = append(workers, w)
	}
	prog := newProgress(c.Progress)
	rampStart := time.Now()
	for len(workers) > 0 {
		var p Progress
		done := true
		for _, w := range workers {
			wp := w.progress()
			p.Connected += wp.Connected
			p.Failed += wp.Failed
			p.Closed += wp.Closed
			done = done && wp.Done
		}
		prog.bar("connect", p.Connected+p.Failed, c.Viewers, fmt.Sprintf("ok %d failed %d closed %d %.0f/s",
			p.Connected, p.Failed, p.Closed, float64(p.Connected+p.Failed)/time.Since(rampStart).Seconds()))
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	rep.RampS = time.Since(rampStart).Seconds()
	prog.end()
	var rdb *redisNodes
	if c.RedisAddr != "" {
		rdb = newRedisNodes(c.RedisAddr)
		defer rdb.close()
	}
	afterRamp := sampleAll(c.Procs)
	if c.Idle > 0 {
		idleFrom, _ := rdb.statsIf(ctx)
		time.Sleep(c.Idle)
		if idleTo, err := rdb.statsIf(ctx); err == nil && idleFrom != nil {
			rep.RedisIdle = redisDelta(idleFrom, idleTo, 0)
			rep.RedisIdle.PerSecond = float64(rep.RedisIdle.Commands) / c.Idle.Seconds()
		}
	}
	idleEnd := sampleAll(c.Procs)
	if c.Settle > 0 {
		time.Sleep(c.Settle)
	}

	var cmdBefore map[string]map[string]int64
	if rdb != nil {
		if cmdBefore, err = rdb.stats(ctx); err != nil {
			rep.Notes = append(rep.Notes, "redis commandstats: "+err.Error())
		}
	}
	dropBefore := scrapeJobs(ctx, c.JobMetrics)
	for _, w := range workers {
		if err := w.mark(); err != nil {
			return nil, fmt.Errorf("mark worker: %w", err)
		}
	}
	markAt := time.Now()
	selfBefore := selfCPU()
	busyBefore, totalBefore := machineCPU()
	mark := sampleAll(c.Procs)

	if c.Senders <= 0 {
		// Open loop needs a free goroutine for every request in flight:
		// room for a quarter second of latency at the highest rate.
		peak := c.Rate
		for _, st := range c.Steps {
			peak = math.Max(peak, st.Rate)
		}
		c.Senders = min(4096, max(64, int(peak/4)))
	}
	snd := newSender(SendSpec{LogicURL: c.LogicURL, Senders: c.Senders, Users: c.Users, Timeout: c.Timeout, PerPost: c.PerPost, Layout: layout,
		CometWS: c.SendSocket, CentrifugoKey: c.CentrifugoKey})
	notices := newNoticeSenders(c, userBase)
	var high *sender
	if c.HighRate > 0 {
		high = newSender(SendSpec{LogicURL: c.LogicURL, Senders: 16, Users: c.Users, Timeout: c.Timeout,
			Layout: layout, High: true, AdminSecret: c.AdminSecret})
	}
	sendStart := time.Now()
	var killed chan string
	if victim > 0 {
		killed = make(chan string, 1)
		t := time.AfterFunc(c.KillAfter, func() {
			if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
				killed <- fmt.Sprintf("kill %s (pid %d): %v", c.Kill, victim, err)
				return
			}
			killed <- fmt.Sprintf("killed %s (pid %d, SIGKILL) %.1f s into sending", c.Kill, victim, time.Since(sendStart).Seconds())
		})
		defer t.Stop()
	}
	var sendStats SendStats
	if len(c.Steps) > 0 {
		var all SendStats
		all.Rejected, all.Errors = map[string]int64{}, map[string]int64{}
		for i, st := range c.Steps {
			snd.reset()
			t0 := time.Now()
			prog.printf("ingest step %d/%d: %s", i+1, len(c.Steps), st)
			if st.Conc > 0 {
				snd.closedLoop(ctx, st.Conc, st.Dur)
			} else {
				snd.openLoop(ctx, st.Rate, st.Dur)
			}
			s := snd.stats(time.Since(t0))
			rep.Ingest = append(rep.Ingest, IngestStep{Step: st.String(), Offered: st.Rate, Conc: st.Conc, SendStats: s})
			all.Sent += s.Sent
			all.Posts += s.Posts
			all.Accepted += s.Accepted
			all.LateSends += s.LateSends
			all.MaxLagMs = math.Max(all.MaxLagMs, s.MaxLagMs)
			all.PostP99Ms = math.Max(all.PostP99Ms, s.PostP99Ms)
			all.PostMaxMs = math.Max(all.PostMaxMs, s.PostMaxMs)
			for k, v := range s.Rejected {
				all.Rejected[k] += v
			}
			for k, v := range s.Errors {
				all.Errors[k] += v
			}
			if s.PostP99Ms < 50 && s.AcceptedPerS > rep.MaxIngestPerS {
				rep.MaxIngestPerS = s.AcceptedPerS
			}
			if ctx.Err() != nil {
				break
			}
		}
		all.DurationS = time.Since(sendStart).Seconds()
		all.AcceptedPerS = float64(all.Accepted) / all.DurationS
		sendStats = all
	} else {
		done := make(chan struct{})
		go func() {
			defer close(done)
			waitNotices := notices.start(ctx, c.Duration)
			highDone := make(chan struct{})
			go func() {
				defer close(highDone)
				if high != nil {
					high.openLoop(ctx, c.HighRate, c.Duration)
				}
			}()
			snd.openLoop(ctx, c.Rate, c.Duration)
			waitNotices()
			<-highDone
		}()
		tick := time.NewTicker(500 * time.Millisecond)
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-tick.C:
				el := time.Since(sendStart)
				snd.mu.Lock()
				sent := snd.sent
				snd.mu.Unlock()
				prog.bar("send", int(el/time.Second), int(c.Duration/time.Second), fmt.Sprintf("sent %d", sent))
			}
		}
		tick.Stop()
		prog.end()
		sendStats = snd.stats(time.Since(sendStart))
	}
	sendEnd := time.Now()
	busySend, totalSend := machineCPU()
	rep.Send = sendStats
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "drain %s\n", c.Drain)
	}
	drainStart := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(c.Drain):
	}
	// Late deliveries are slow, not lost: wait while they still arrive
	// and while viewers are still away after a drop.
	var last uint64
	for still := 0; still < 6 && time.Since(drainStart) < c.MaxDrain && ctx.Err() == nil; {
		var d uint64
		away := 0
		for _, w := range workers {
			wp := w.progress()
			d += wp.Delivered
			away += wp.Away
		}
		if d == last && away == 0 {
			still++
		} else {
			still = 0
		}
		last = d
		time.Sleep(500 * time.Millisecond)
	}
	rep.DrainS = time.Since(drainStart).Seconds()

	end := sampleAll(c.Procs)
	selfAfter := selfCPU()
	busyAfter, totalAfter := machineCPU()
	if totalAfter > totalBefore {
		// Percent of one core, like the per-process figures.
		rep.MachineCPUPct = 100 * float64(runtime.NumCPU()) * (busyAfter - busyBefore) / (totalAfter - totalBefore)
	}
	if totalSend > totalBefore {
		rep.MachineSendCPUPct = 100 * float64(runtime.NumCPU()) * (busySend - busyBefore) / (totalSend - totalBefore)
	}
	window := time.Since(markAt)
	dropAfter := scrapeJobs(ctx, c.JobMetrics)
	if rdb != nil && cmdBefore != nil {
		if after, err := rdb.stats(ctx); err == nil {
			rep.Redis = redisDelta(cmdBefore, after, sendStats.Accepted)
		}
	}
	var results []*PoolResult
	for i, w := range workers {
		r, err := w.finish()
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		results = append(results, r)
	}
	rep.JobDropped = map[string]float64{}
	for k, v := range dropAfter {
		if d := v - dropBefore[k]; d != 0 {
			rep.JobDropped[k] = d
		}
	}
	rep.serverStats(c.Procs, before, afterRamp, c.Idle, idleEnd, mark, end)
	rep.GeneratorCPUPct = 100 * (selfAfter - selfBefore) / window.Seconds()
	for _, r := range results {
		if remote {
			rep.GeneratorCPUPct += 100 * r.CPUSeconds / window.Seconds()
		}
	}
	rep.compress = c.Compress
	rep.account(layout, snd, high, results, sendStart, sendEnd)
	rep.accountNotices(notices, results, sendEnd.Sub(sendStart))
	if c.RedisAddr != "" && len(layout.Rooms) > 0 {
		if n, err := repeatedIDs(ctx, c.RedisAddr, layout.Rooms); err != nil {
			rep.Notes = append(rep.Notes, "history check failed: "+err.Error())
		} else {
			rep.HistoryRepeats = &n
		}
	}
	if killed != nil {
		select {
		case k := <-killed:
			rep.Notes = append(rep.Notes, k)
		default:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s was not killed: sending ended first", c.Kill))
		}
	}
	rep.Finalize()
	rep.judge(c)
	return rep, nil
}

func sampleAll(ps []Proc) []procSample {
	out := make([]procSample, len(ps))
	for i, p := range ps {
		out[i] = sampleProc(p.PID)
	}
	return out
}

func scrapeJobs(ctx context.Context, urls []string) map[string]float64 {
	out := map[string]float64{}
	for _, u := range urls {
		m, err := promtext.Scrape(ctx, u)
		if err != nil {
			continue
		}
		for reason, v := range m.ByLabel("danmaku_job_dropped_total", "reason") {
			out[reason] += v
		}
	}
	return out
}
