// Command idleload measures the memory a comet spends per idle viewer. It
// runs the comet (real route store on a real Redis) in one child process and
// the viewers in another, so the figure is the server's alone:
//
//	redis-server --port 6399 --save '' --daemonize yes
//	go run ./internal/tools/idleload -redis 127.0.0.1:6399 -n 1000,15000
//
// For each count it prints the comet's resident set before and after the
// viewers connected and joined, the difference per viewer, the same after a
// forced GC, and the Go runtime's view (heap in use, stacks, goroutines).
//
// With -heartbeat the viewers also send {"op":"ping"} heartbeatMs (of
// their welcome) after the last one or after its pong, as danmaku.js does
// (-beat-after-pong=false: every heartbeatMs from a random start, as
// danmaku.js did before).
//
// Beside the comet's CPU over the window it prints the viewers' process's,
// the soft interrupts of the whole machine (the kernel's network and timer
// work no process is charged for) and the TCP segments the machine sent a
// second, so run it on a quiet machine. -keepalive sets the viewers' TCP
// keepalive (Go's 15 s by default; a negative value: none).
//
// With -centrifugo BIN the same viewers (bare gorilla clients, one
// subscription each, answering the server's pings) are measured against a
// Centrifugo binary instead, run with its defaults on loopback (see
// centrifugo.go), so the two servers are compared with one client and one
// window.
//
// The modes "serve" and "clients" are the two children; "clients" also
// serves the fan-out benchmark as a peer process holding the viewer sockets.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/route"
)

func main() {
	mode := flag.String("mode", "measure", "measure, serve or clients")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis address (serve, measure)")
	counts := flag.String("n", "1000,15000", "viewer counts to measure (measure) or open (clients)")
	addr := flag.String("addr", "", "comet public address (clients)")
	room := flag.String("room", "idle", "room the viewers join (clients)")
	rooms := flag.Int("rooms", 1, "spread viewers over this many rooms (clients, measure)")
	flag.BoolVar(&compress, "compress", false, "offer permessage-deflate (clients, measure)")
	settle := flag.Duration("settle", 5*time.Second, "idle time before measuring (measure)")
	pingPeriod := flag.Duration("ping-period", 0, "the comet's ping_period (serve, measure; 0: the default)")
	cpuWindow := flag.Duration("cpu-window", 30*time.Second, "how long the comet's CPU is measured while the viewers idle, after settle (measure; 0: not measured)")
	flag.StringVar(&centrifugoBin, "centrifugo", "", "measure this Centrifugo binary instead of a comet (measure)")
	flag.StringVar(&proto, "proto", "comet", "the viewers' protocol, comet or centrifugo (clients)")
	flag.BoolVar(&heartbeat, "heartbeat", false, `viewers also send {"op":"ping"} every heartbeatMs of their welcome, as danmaku.js does (clients, measure)`)
	flag.DurationVar(&keepAlive, "keepalive", 0, "the viewers' TCP keepalive idle time (clients, measure; 0: Go's default, 15 s; negative: none)")
	flag.BoolVar(&afterPong, "beat-after-pong", true, "with -heartbeat, a viewer's next heartbeat goes heartbeatMs after the pong of the last one, as danmaku.js does; false: every heartbeatMs (clients, measure)")
	flag.Parse()
	var err error
	switch *mode {
	case "serve":
		err = serve(*redisAddr, *pingPeriod)
	case "clients":
		n, _ := strconv.Atoi(*counts)
		err = clients(*addr, *room, *rooms, n, compress, proto)
	case "measure":
		servePing = *pingPeriod
		if centrifugoBin != "" {
			proto = "centrifugo"
		}
		err = measure(*redisAddr, *counts, *rooms, *settle, *cpuWindow)
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idleload:", err)
		os.Exit(1)
	}
}

// serve runs a comet with the default configuration on loopback ports and
// answers commands on stdin: "gc" forces a collection and returns memory
// to the OS, "stats" prints runtime figures. EOF stops it.
func serve(redisAddr string, pingPeriod time.Duration) error {
	if os.Getenv("IDLELOAD_PROFILE") != "" {
		runtime.MemProfileRate = 64 // exact attribution, at a memory cost
	}
	cfg := comet.DefaultConfig()
	cfg.ID = fmt.Sprintf("idleload-%d", os.Getpid())
	cfg.Listen, cfg.InternalListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Secret = "idleload-push-secret"
	cfg.MaxConnsPerIP = 0
	if pingPeriod > 0 {
		cfg.PingPeriod = pingPeriod
		cfg.PongWait = max(cfg.PongWait, 2*pingPeriod)
	}
	// The client as cmd/comet builds it.
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 64,
		ContextTimeoutEnabled: true, ReadBufferSize: 4096, WriteBufferSize: 4096})
	s, err := comet.New(cfg, comet.Deps{Store: route.New(rdb)})
	if err != nil {
		return err
	}
	if err := s.Start(context.Background()); err != nil {
		return err
	}
	fmt.Printf("READY %s %s\n", s.PublicAddr(), s.AdvertiseAddr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "gc":
			runtime.GC()
			debug.FreeOSMemory()
			fmt.Println("OK")
		case "heap":
			// A heap profile of what the idle viewers hold, for go tool pprof.
			runtime.GC()
			f, err := os.Create(fmt.Sprintf("/tmp/idle-heap-%d.pprof", os.Getpid()))
			if err == nil {
				pprof.WriteHeapProfile(f)
				f.Close()
			}
			fmt.Println("OK")
		case "goroutines":
			if f, err := os.Create(fmt.Sprintf("/tmp/idle-goroutines-%d.txt", os.Getpid())); err == nil {
				pprof.Lookup("goroutine").WriteTo(f, 1)
				f.Close()
			}
			fmt.Println("OK")
		case "cpuprofile":
			// A CPU profile of the comet until "cpuprofile-stop", for go
			// tool pprof.
			f, err := os.Create(fmt.Sprintf("/tmp/idle-cpu-%d.pprof", os.Getpid()))
			if err == nil {
				pprof.StartCPUProfile(f)
				defer f.Close()
			}
			fmt.Println("OK")
		case "cpuprofile-stop":
			pprof.StopCPUProfile()
			fmt.Println("OK")
		case "stats":
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Printf("STATS heap_inuse=%d stack_inuse=%d sys=%d goroutines=%d\n",
				ms.HeapInuse, ms.StackInuse, ms.Sys, runtime.NumGoroutine())
		}
	}
	return s.Shutdown(context.Background())
}

// clients opens n viewers spread over source addresses 127.0.0.1-20 (so the
// ephemeral ports of one source address never run out), joins them to
// room (or room-0 .. room-k), keeps reading (answering pings) and prints
// "CONNECTED n" once all got their welcome. EOF on stdin ends it.
//
// The connections are bare gorilla clients with small buffers, not the
// tests' recording viewer: what is measured is the comet's memory per idle
// viewer, and the peer should hold as little as it can per socket.
func clients(addr, room string, rooms, n int, compress bool, proto string) error {
	var connected, failed atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	conns := make([]*websocket.Conn, n)
	pongs := make([]chan struct{}, n) // a viewer's pongs, for its heartbeat
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%20))}
			d := websocket.Dialer{
				NetDial:           (&net.Dialer{LocalAddr: src, Timeout: 10 * time.Second, KeepAlive: keepAlive}).Dial,
				ReadBufferSize:    512,
				WriteBufferSize:   256,
				HandshakeTimeout:  10 * time.Second,
				EnableCompression: compress,
			}
			r := room
			if rooms > 1 {
				r = fmt.Sprintf("%s-%d", room, i%rooms)
			}
			c, welcome, err := join(&d, addr, r, proto)
			if err != nil {
				if failed.Add(1) <= 3 {
					fmt.Fprintln(os.Stderr, "join:", err)
				}
				return
			}
			if heartbeat {
				var w struct{ HeartbeatMs int64 }
				json.Unmarshal(welcome, &w)
				pongs[i] = make(chan struct{}, 1)
				go beat(c, time.Duration(w.HeartbeatMs)*time.Millisecond, pongs[i])
			}
			conns[i] = c
			connected.Add(1)
		}()
	}
	wg.Wait()
	for i, c := range conns {
		switch {
		case c == nil:
		case proto == "centrifugo":
			go answerPings(c)
		default:
			go drain(c, pongs[i])
		}
	}
	fmt.Printf("CONNECTED %d FAILED %d\n", connected.Load(), failed.Load())
	io.Copy(io.Discard, os.Stdin)
	fmt.Printf("DROPPED %d\n", dropped.Load())
	return nil
}

// dropped counts the viewers whose connection ended while they idled (the
// server closed them: a ping not answered in time, for one).
var dropped atomic.Int64

// join opens a viewer of room and returns it with the comet's welcome
// (Centrifugo's replies to connect and subscribe for proto centrifugo).
func join(d *websocket.Dialer, addr, room, proto string) (*websocket.Conn, []byte, error) {
	if proto == "centrifugo" {
		return joinCentrifugo(d, addr, room)
	}
	c, _, err := d.Dial("ws://"+addr+"/ws?room="+room, nil)
	if err != nil {
		return nil, nil, err
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, welcome, err := c.ReadMessage()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	c.SetReadDeadline(time.Time{})
	return c, welcome, nil
}

// beat sends {"op":"ping"} period after the last one, or after the pong
// that answered it (-beat-after-pong), starting at a random point of the
// first period, as danmaku.js does, until the connection fails.
func beat(c *websocket.Conn, period time.Duration, pongs <-chan struct{}) {
	if period <= 0 {
		return
	}
	next := time.NewTimer(rand.N(period))
	for {
		select {
		case <-next.C:
			if c.WriteMessage(websocket.TextMessage, []byte(`{"op":"ping"}`)) != nil {
				return
			}
			next.Reset(period)
		case <-pongs:
			if afterPong {
				next.Reset(period)
			}
		}
	}
}

// drain reads and discards frames, telling pongs (when not nil) of every
// pong frame; pings are answered by the library.
func drain(c *websocket.Conn, pongs chan<- struct{}) {
	var buf [64]byte
	for {
		_, r, err := c.NextReader()
		if err != nil {
			dropped.Add(1)
			return
		}
		n, _ := io.ReadFull(r, buf[:])
		io.Copy(io.Discard, r)
		if pongs != nil && string(buf[:n]) == `{"op":"pong"}` {
			select {
			case pongs <- struct{}{}:
			default:
			}
		}
	}
}

// idleCPUPercent measures the comet's CPU over window while the viewers
// idle, in percent of one core; with IDLELOAD_CPUPROFILE set the comet
// writes a CPU profile of the window.
func idleCPUPercent(srv *child, pid int, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	profile := os.Getenv("IDLELOAD_CPUPROFILE") != "" && !srv.external
	if profile {
		srv.ask("cpuprofile", "OK")
	}
	c0, k0, v0, s0, t0 := cpuSeconds(pid), softirqSeconds(), cpuSeconds(viewersPid), tcpOutSegs(), time.Now()
	time.Sleep(window)
	c1, k1, v1, s1, t1 := cpuSeconds(pid), softirqSeconds(), cpuSeconds(viewersPid), tcpOutSegs(), time.Now()
	if profile {
		srv.ask("cpuprofile-stop", "OK")
		fmt.Printf("  CPU profile: /tmp/idle-cpu-%d.pprof\n", pid)
	}
	sec := t1.Sub(t0).Seconds()
	machineNote = fmt.Sprintf("  beside it: the viewers' process %.2f %%, soft interrupts of the whole machine %.2f %% of a core; %.0f TCP segments a second sent on the machine\n",
		100*(v1-v0)/sec, 100*(k1-k0)/sec, float64(s1-s0)/sec)
	return 100 * (c1 - c0) / sec
}

// viewersPid is the viewers' process while a window is measured, and
// machineNote what the window cost beside the comet: that process, and the
// soft interrupts (the kernel's network and timer work, such as TCP
// keepalive probes and delayed acknowledgements, charged to no process) of
// every process on the machine, so run it on a quiet one.
var (
	viewersPid  int
	machineNote string
)

// tcpOutSegs is the number of TCP segments the machine sent, from
// /proc/net/snmp (both ends of every loopback connection count).
func tcpOutSegs() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var head []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i := range min(len(f), len(head)) {
			if head[i] == "OutSegs" {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				return n
			}
		}
	}
	return 0
}

// softirqSeconds is the time all CPUs spent in soft interrupts, from
// /proc/stat.
func softirqSeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq ...
	if len(f) < 8 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[7], 64)
	return v / 100 // USER_HZ
}

// servePing is the -ping-period measure hands its comet.
var servePing time.Duration

// heartbeat, afterPong and compress are -heartbeat, -beat-after-pong and
// -compress.
var heartbeat, afterPong, compress bool

// keepAlive is -keepalive.
var keepAlive time.Duration

// centrifugoBin and proto are -centrifugo and -proto.
var centrifugoBin, proto string

type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	// external is set for a server that is not this program (Centrifugo):
	// it takes no commands.
	external bool
	dir      string // removed by stop
}

// ask sends a command to a serving child and returns its answer, the line
// starting with prefix ("" from an external server).
func (c *child) ask(cmd, prefix string) string {
	if c.external {
		return ""
	}
	fmt.Fprintln(c.in, cmd)
	line, _ := c.expect(prefix)
	return line
}

func start(args ...string) (*child, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// expect reads lines until one starts with prefix.
func (c *child) expect(prefix string) (string, error) {
	for c.out.Scan() {
		if line := c.out.Text(); strings.HasPrefix(line, prefix) {
			return line, nil
		}
	}
	return "", fmt.Errorf("child ended before %q", prefix)
}

func (c *child) stop() {
	if c.dir != "" {
		defer os.RemoveAll(c.dir)
	}
	if c.external {
		c.cmd.Process.Signal(os.Interrupt)
	}
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// rss returns VmRSS of pid in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return -1
}

// cpuSeconds returns the user and system CPU time of pid.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name may hold spaces; fields start after the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func measure(redisAddr, counts string, rooms int, settle, cpuWindow time.Duration) error {
	for _, s := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		if err := measureOne(redisAddr, n, rooms, settle, cpuWindow); err != nil {
			return err
		}
	}
	return nil
}

// startServer starts the server measured: a comet in a child process, or
// Centrifugo with -centrifugo. It returns the child and the viewers' address.
func startServer(redisAddr string) (*child, string, error) {
	if centrifugoBin != "" {
		return startCentrifugo(centrifugoBin)
	}
	srv, err := start("-mode", "serve", "-redis", redisAddr, "-ping-period", servePing.String())
	if err != nil {
		return nil, "", err
	}
	line, err := srv.expect("READY")
	if err != nil {
		srv.stop()
		return nil, "", err
	}
	return srv, strings.Fields(line)[1], nil
}

func measureOne(redisAddr string, n, rooms int, settle, cpuWindow time.Duration) error {
	srv, addr, err := startServer(redisAddr)
	if err != nil {
		return err
	}
	defer srv.stop()
	pid := srv.cmd.Process.Pid
	time.Sleep(time.Second)
	cold := rss(pid)
	viewers := func(n int, room string) (*child, error) {
		return start("-mode", "clients", "-addr", addr, "-n", strconv.Itoa(n), "-room", room, "-proto", proto,
			"-rooms", strconv.Itoa(rooms), fmt.Sprintf("-heartbeat=%v", heartbeat), fmt.Sprintf("-beat-after-pong=%v", afterPong),
			fmt.Sprintf("-compress=%v", compress), "-keepalive", keepAlive.String())
	}
	// Warm up: a round of viewers that connect and leave fills the Redis
	// connection pool and the runtime's caches, fixed costs that do not grow
	// with the number of viewers.
	if warm, err := viewers(500, fmt.Sprintf("warm%d", pid)); err == nil {
		warm.expect("CONNECTED")
		warm.stop()
	}
	time.Sleep(2 * time.Second)
	srv.ask("gc", "OK")
	base := rss(pid)

	t0 := time.Now()
	cl, err := viewers(n, fmt.Sprintf("idle%d", pid))
	if err != nil {
		return err
	}
	defer cl.stop()
	line, err := cl.expect("CONNECTED")
	if err != nil {
		return err
	}
	took := time.Since(t0)
	var got int
	fmt.Sscanf(line, "CONNECTED %d", &got)
	time.Sleep(settle)
	idle := rss(pid)
	viewersPid = cl.cmd.Process.Pid
	idleCPU := idleCPUPercent(srv, pid, cpuWindow)
	stats := srv.ask("stats", "STATS")
	if os.Getenv("IDLELOAD_PROFILE") != "" {
		srv.ask("heap", "OK")
		srv.ask("goroutines", "OK")
	}
	srv.ask("gc", "OK")
	afterGC := rss(pid)
	statsGC := srv.ask("stats", "STATS")
	cl.in.Close()
	line, _ = cl.expect("DROPPED")
	var lost int
	fmt.Sscanf(line, "DROPPED %d", &lost)
	if srv.external {
		afterGC = idle // no way to force a collection
	}

	fmt.Printf("viewers=%d (connected in %v, %d rooms; %d closed by the server while idle)\n", got, took.Round(time.Millisecond), rooms, lost)
	fmt.Printf("  rss cold=%d KiB (%.0f bytes/viewer against it)\n", cold>>10, float64(idle-cold)/float64(got))
	fmt.Printf("  rss warm=%d KiB idle=%d KiB -> %.0f bytes/viewer (%.2f KiB)\n",
		base>>10, idle>>10, float64(idle-base)/float64(got), float64(idle-base)/float64(got)/1024)
	fmt.Printf("  after forced GC: rss=%d KiB -> %.0f bytes/viewer (%.2f KiB)\n",
		afterGC>>10, float64(afterGC-base)/float64(got), float64(afterGC-base)/float64(got)/1024)
	if cpuWindow > 0 {
		fmt.Printf("  idle CPU over %v: %.2f %% of a core (%.1f us per viewer-second)\n",
			cpuWindow, idleCPU, idleCPU*1e4/float64(max(got, 1)))
		fmt.Print(machineNote)
	}
	fmt.Printf("  runtime idle:     %s\n  runtime after GC: %s\n", strings.TrimPrefix(stats, "STATS "), strings.TrimPrefix(statsGC, "STATS "))
	return nil
}
