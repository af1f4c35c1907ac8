// Command loadtest is the hot-room load generator: it opens WebSocket
// viewers on the comets, posts messages to logic at a fixed open-loop rate,
// and reports deliveries, losses, duplicates, latency and the servers' CPU
// and memory. It exits with status 1 when a delivery was lost or
// duplicated.
//
//	loadtest -comets 127.0.0.1:8080 -logic http://127.0.0.1:8090 \
//	    -viewers 10000 -rooms 1 -rate 1000 -duration 30s -json s1.json -svg s1.svg
//
// -user-rate R and -broadcast-rate B post notices instead of (or besides)
// room messages: R pushes a second to random viewers' users and B
// broadcasts a second, each viewer connecting as a user of its own
// (scenario U1); -admin-secret is logic's.
//
// -tiers 30:0.99,all:0.01 gives viewers density caps (a mix) and
// -high-rate H adds high-priority messages: each capped viewer's rate is
// judged against its cap over 10 s windows, the high lane and the all
// tier exactly; the wire bytes per delivered comment are reported.
//
// -sse makes the viewers read GET /sse streams instead of WebSockets (the
// same frames as server-sent events; resumes use since and epoch alike).
//
// -jitter D makes every viewer drop once during sending and resume after
// about D; -churn F makes a share F of them drop -churn-drops times. Viewers
// resume with ?since=POS&epoch=E and are accounted like viewers that never
// left.
//
// With more viewers than -per-process it re-executes itself as worker
// processes (-worker, driven over stdin/stdout) and merges their results.
// -kafka-embedded ADDR runs the embedded Kafka-protocol broker instead,
// for benchmark scripts on machines without Kafka, and -http-floor ADDR a
// bare send endpoint with nothing behind it (scenario S4F). See BENCHMARKS.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/danmaku/danmaku/internal/tools/loadtest"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// run returns the exit status: 0 pass, 1 lost or duplicated deliveries,
// 2 bad usage or a failed run.
func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	var (
		c                        loadtest.Config
		comets, pids, jobMetrics listFlag
		worker                   = fs.Bool("worker", false, "run as a viewer worker process driven over stdin/stdout (internal)")
		kafkaAddr                = fs.String("kafka-embedded", "", "run only the embedded Kafka broker on this address (e.g. 127.0.0.1:19092) until SIGTERM")
		kafkaData                = fs.String("kafka-data", "", "with -kafka-embedded: data directory (empty: in memory)")
		kafkaTopic               = fs.String("kafka-topic", "danmaku-room", "with -kafka-embedded: topic to create")
		kafkaParts               = fs.Int("kafka-partitions", 16, "with -kafka-embedded: partitions of the topic")
		floorAddr                = fs.String("http-floor", "", "run only a bare POST /logic/send on this address (no rate limit, Redis or Kafka) until SIGTERM: net/http's and JSON's share of logic's cost")
		ingest                   = fs.String("ingest", "", "ingest mode steps instead of -rate/-duration: rRATE:DUR (open loop) or cCONC:DUR (closed loop), comma separated, e.g. r10000:5s,r20000:5s,c64:10s")
		jsonOut                  = fs.String("json", "", "write the report as JSON to this file")
		svgOut                   = fs.String("svg", "", "write a chart of deliveries/s and latency to this SVG file")
		cpuProfile               = fs.String("cpuprofile", "", "write the generator's CPU profile to this file (workers: FILE.workerN)")
		quiet                    = fs.Bool("quiet", false, "no progress bar")
		label                    = fs.String("label", "", "free text for the report, e.g. the server settings")
	)
	fs.StringVar(&c.Scenario, "scenario", "loadtest", "name of the run in the report")
	fs.Var(&comets, "comets", "comet public addresses host:port, comma separated (viewer i goes to comet i mod n)")
	fs.StringVar(&c.LogicURL, "logic", "http://127.0.0.1:8090", "logic base URL")
	fs.IntVar(&c.Viewers, "viewers", 1000, "WebSocket viewers")
	fs.IntVar(&c.Rooms, "rooms", 1, "rooms")
	fs.StringVar(&c.RoomPrefix, "room-prefix", "lt-room-", "room id prefix; room k is PREFIX+k")
	fs.Float64Var(&c.Hot, "hot", 0.8, "share of viewers and messages in room 0 (with -zipf 0 and more than one room)")
	fs.Float64Var(&c.Zipf, "zipf", 0, "Zipf exponent of viewers and messages over the rooms (0: use -hot)")
	fs.Float64Var(&c.ConnRate, "conn-rate", 2000, "new connections per second, all processes together")
	fs.IntVar(&c.Dialers, "dialers", 64, "handshakes in flight per process")
	fs.IntVar(&c.PerProcess, "per-process", 15000, "most viewers per process; more are split over worker processes (open-file limit)")
	fs.IntVar(&c.InProcessMax, "in-process-max", 1000, "up to this many viewers run in the senders' process; more go to worker processes")
	fs.IntVar(&c.SourceIPs, "source-ips", 0, "bind viewers round-robin to this many 127.0.0.x source addresses (0: one per 20,000 viewers of a process)")
	fs.IntVar(&c.SourceBase, "source-base", 1, "first source address 127.0.0.N")
	fs.IntVar(&c.ExactSample, "exact-sample", 0, "0: account every message of every viewer; N: exactly for at least N viewers, count the rest")
	fs.DurationVar(&c.DialTimeout, "dial-timeout", 15*time.Second, "bound of one connection and its welcome frame")
	fs.Float64Var(&c.Rate, "rate", 1000, "messages per second (open loop)")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "sending time")
	fs.IntVar(&c.Senders, "senders", 0, "sender goroutines, each with a keep-alive connection (0: rate/4, at least 64, at most 4096)")
	fs.IntVar(&c.PerPost, "per-post", 1, "messages per request (ingest runs; -rate and -ingest rates count requests)")
	fs.IntVar(&c.Users, "users", 1000, "distinct userIds the messages rotate through")
	fs.Float64Var(&c.UserRate, "user-rate", 0, "notices per second to users drawn at random among the viewers (POST /logic/push/user); every viewer connects as a user of its own")
	fs.Float64Var(&c.BroadcastRate, "broadcast-rate", 0, "broadcasts per second (POST /logic/broadcast) to every viewer")
	fs.StringVar(&c.AdminSecret, "admin-secret", "", "logic.admin_secret, for -user-rate, -broadcast-rate and -high-rate")
	tiers := fs.String("tiers", "", "viewers' density caps as CAP:SHARE,... (CAP a number or all; shares sum to 1), e.g. 30:0.99,all:0.01: capped viewers dial with density=CAP and are held to it over 10 s windows")
	fs.Float64Var(&c.HighRate, "high-rate", 0, "high-priority messages per second (POST /logic/admin/send with -admin-secret, \"priority\":1), accounted exactly for every viewer of every tier")
	fs.BoolVar(&c.Compress, "compress", false, "viewers offer permessage-deflate as browsers do; each distinct compressed frame is inflated once per viewer process")
	fs.StringVar(&c.CentrifugoKey, "centrifugo-key", "", "-logic is a Centrifugo server: publish each request to its HTTP API (POST /api/publish, channel = room) with this API key, to compare it with POST /logic/send under the same client (-viewers 0)")
	fs.StringVar(&c.SendSocket, "send-socket", "", "send the messages as {\"op\":\"send\"} frames on sockets to this comet (ws://host:port/ws, comet.socket_send) instead of POST /logic/send")
	fs.BoolVar(&c.SSE, "sse", false, "viewers read server-sent events from GET /sse (the fallback transport) instead of WebSockets")
	fs.DurationVar(&c.TargetHighP99, "target-high-p99", 0, "report whether the high-priority lane's p99 latency stays under this")
	fs.StringVar(&c.TokenSecret, "token-secret", "", "the comets' auth.hmac_secret, for -user-rate: each viewer proves its user with a token it signs (comets send user notices only to proven users)")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Second, "bound of one POST")
	fs.DurationVar(&c.Settle, "settle", time.Second, "pause between the ramp and sending")
	fs.DurationVar(&c.Warmup, "warmup", 30*time.Second, "before the ramp, wait at most this long for one message to go through each comet (0: skip)")
	fs.DurationVar(&c.Idle, "idle", 0, "measure server CPU with idle viewers this long before sending")
	fs.DurationVar(&c.Drain, "drain", 3*time.Second, "wait after the last send before counting")
	fs.DurationVar(&c.MaxDrain, "max-drain", 60*time.Second, "after -drain, keep waiting while deliveries still arrive, at most this long")
	fs.DurationVar(&c.Jitter, "jitter", 0, "every viewer drops (closes its socket abruptly) once at a random moment of sending, stays away about this long and resumes (0: off)")
	fs.Float64Var(&c.Churn, "churn", 0, "share of viewers (0..1) that drop and resume at random moments of sending")
	fs.IntVar(&c.ChurnDrops, "churn-drops", 2, "with -churn: drops per churning viewer")
	fs.DurationVar(&c.ChurnAway, "churn-away", time.Second, "with -churn: each drop stays away a random time up to this")
	fs.StringVar(&c.Kill, "kill", "", "kill (SIGKILL) the -pid process of this NAME -kill-after into sending: a crash under load")
	fs.DurationVar(&c.KillAfter, "kill-after", 0, "when -kill strikes, counted from the start of sending")
	fs.IntVar(&c.Standby, "standby", 0, "the last N comets of -comets get viewers only when a dial to another fails (a viewer moves to the next comet of the list on a failed dial)")
	fs.IntVar(&c.Reconnects, "reconnects", 0, "a viewer cut by the server or the network resumes at most this many times (0: it stays closed and is not counted whole-time)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the drop plan (0: from the clock)")
	fs.Var(&pids, "pid", "server process to watch as NAME=PID (repeatable); names starting with comet count for RSS per connection")
	fs.Var(&jobMetrics, "job-metrics", "job /metrics URL(s), for danmaku_job_dropped_total")
	fs.StringVar(&c.RedisAddr, "redis", "", "Redis address for INFO commandstats before and after (a cluster: its masters, comma separated; per-node shares are reported)")
	fs.DurationVar(&c.TargetP99, "target-p99", 0, "report whether p99 latency stays under this")
	fs.DurationVar(&c.TargetLiveP99, "target-live-p99", 0, "report whether p99 latency of messages in live frames (not replays) stays under this")
	fs.Float64Var(&c.TargetDPS, "target-dps", 0, "report whether the median deliveries/s reaches this")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *worker {
		if err := loadtest.RunWorker(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest worker:", err)
			return 2
		}
		return 0
	}
	if *kafkaAddr != "" {
		return runKafka(ctx, *kafkaAddr, *kafkaData, *kafkaTopic, *kafkaParts)
	}
	if *floorAddr != "" {
		return runFloor(ctx, *floorAddr)
	}
	c.Comets = comets
	c.JobMetrics = jobMetrics
	var err error
	if c.Tiers, err = loadtest.ParseTiers(*tiers); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: -tiers:", err)
		return 2
	}
	for _, p := range pids {
		name, pid, ok := strings.Cut(p, "=")
		if _, err := strconv.Atoi(pid); !ok || err != nil {
			fmt.Fprintf(os.Stderr, "loadtest: -pid %q: want NAME=PID\n", p)
			return 2
		}
		c.Procs = append(c.Procs, loadtest.Proc{Name: name, PID: pid})
	}
	if *ingest != "" {
		steps, err := parseSteps(*ingest)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: -ingest:", err)
			return 2
		}
		c.Steps = steps
	}
	if !*quiet {
		c.Progress = os.Stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			return 2
		}
		defer f.Close()
		c.WorkerProfile = *cpuProfile
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := loadtest.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 2
	}
	rep.Command = "loadtest " + strings.Join(args, " ")
	rep.Label = *label
	rep.Print(os.Stdout)
	if *jsonOut != "" {
		if err := rep.WriteJSON(*jsonOut); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			return 2
		}
	}
	if *svgOut != "" {
		if err := rep.WriteSVG(*svgOut); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			return 2
		}
	}
	if !rep.Pass {
		return 1
	}
	return 0
}

// parseSteps reads "r10000:5s,c64:10s".
func parseSteps(s string) ([]loadtest.Step, error) {
	var out []loadtest.Step
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		kind, rest, ok := strings.Cut(part, ":")
		if !ok || len(kind) < 2 {
			return nil, fmt.Errorf("step %q: want rRATE:DUR or cCONC:DUR", part)
		}
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("step %q: bad duration", part)
		}
		n, err := strconv.ParseFloat(kind[1:], 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("step %q: bad number", part)
		}
		switch kind[0] {
		case 'r':
			out = append(out, loadtest.Step{Rate: n, Dur: d})
		case 'c':
			out = append(out, loadtest.Step{Conc: int(n), Dur: d})
		default:
			return nil, fmt.Errorf("step %q: want r or c", part)
		}
	}
	return out, nil
}
