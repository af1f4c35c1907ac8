// Package netlab puts the processes of a fault test on hosts of their
// own: each host is a Linux network namespace joined by a veth pair to a
// bridge in a hub namespace, with a private address (NET.n/24) that exists
// only inside the namespaces. The test process itself runs in a network
// namespace of its own (Reexec) that is plugged into the bridge as host
// "client", so its viewers and senders reach the roles by their
// addresses, and nothing is added to the machine's own network.
//
// Faults are applied to live processes: Cut drops every packet between two
// hosts (iptables in the first one's namespace, both directions), Loss drops
// a share of the packets between two hosts at random (iptables statistic
// match), and Proxy relays a TCP port through the test process with an
// added delay that can be turned on and off (the kernel's netem qdisc is
// not available everywhere, the relay is). Each returns a heal function;
// everything is removed when the test ends.
//
// Needs root, iproute2 (ip), iptables (nft or legacy) and util-linux
// (unshare); a missing one fails the test.
package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// reexecEnv marks the test process that Reexec started in its own network
// namespace.
const reexecEnv = "DANMAKU_NETLAB_INNER"

// Reexec runs the test binary again in a new network namespace of its own
// (unshare --net) and returns its exit code, or -1 when this process is
// already that one (then TestMain goes on to m.Run). Call it first in
// TestMain.
func Reexec() int {
	if os.Getenv(reexecEnv) != "" {
		// The roles must not see it (they warn about unknown DANMAKU_
		// variables).
		os.Unsetenv(reexecEnv)
		inner = true
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "netlab: lo up: %v %s\n", err, out)
			return 2
		}
		return -1
	}
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "netlab: fault tests need root (network namespaces, iptables)")
		return 2
	}
	for _, c := range []string{"ip", "iptables", "unshare"} {
		if _, err := exec.LookPath(c); err != nil {
			fmt.Fprintf(os.Stderr, "netlab: %s not found (Debian: iproute2, iptables, util-linux)\n", c)
			return 2
		}
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--", os.Args[0]}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), reexecEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "netlab: unshare: %v\n", err)
		return 2
	}
	return 0
}

// inner is set in the process Reexec started.
var inner bool

// Net is the /24 every lab uses: labs never share a bridge, so they do not
// collide.
const Net = "10.79.0"

var labSeq atomic.Int64

// Lab is one set of hosts on one bridge.
type Lab struct {
	tb     testing.TB
	prefix string
	hub    string

	mu    sync.Mutex
	hosts map[string]*Host
	next  int
}

// Host is one network namespace of a lab (or the test process's own, for
// the client host).
type Host struct {
	Name string
	IP   string
	ns   string // "" for the client host (the test's namespace)
	lab  *Lab
}

// New builds a lab with its bridge and the client host; its cleanup
// kills what still runs in its namespaces and removes them.
func New(tb testing.TB) *Lab {
	tb.Helper()
	if !inner {
		tb.Fatal("netlab: the test binary's TestMain must call netlab.Reexec")
	}
	l := &Lab{tb: tb, prefix: fmt.Sprintf("dmfl%d-%d", os.Getpid()%100000, labSeq.Add(1)), hosts: map[string]*Host{}, next: 10}
	l.hub = l.prefix + "-hub"
	tb.Cleanup(l.remove)
	l.must("ip", "netns", "add", l.hub)
	l.must("ip", "-n", l.hub, "link", "add", "br0", "type", "bridge")
	l.must("ip", "-n", l.hub, "link", "set", "br0", "up")
	// The client host is this process's namespace, plugged into the bridge.
	c := &Host{Name: "client", IP: Net + ".2", lab: l}
	veth := "nl" + strconv.Itoa(int(labSeq.Load()))
	l.must("ip", "link", "add", veth, "type", "veth", "peer", "name", "v-client", "netns", l.hub)
	l.must("ip", "-n", l.hub, "link", "set", "v-client", "master", "br0", "up")
	l.must("ip", "addr", "add", c.IP+"/24", "dev", veth)
	l.must("ip", "link", "set", veth, "up")
	l.hosts[c.Name] = c
	return l
}

// Client is the host of the test process.
func (l *Lab) Client() *Host { return l.hosts["client"] }

// Host adds a host named name with the next free address.
func (l *Lab) Host(name string) *Host {
	l.tb.Helper()
	l.mu.Lock()
	l.next++
	h := &Host{Name: name, IP: Net + "." + strconv.Itoa(l.next), ns: l.prefix + "-" + name, lab: l}
	l.hosts[name] = h
	l.mu.Unlock()
	l.must("ip", "netns", "add", h.ns)
	l.must("ip", "-n", l.hub, "link", "add", "v-"+name, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
	l.must("ip", "-n", l.hub, "link", "set", "v-"+name, "master", "br0", "up")
	l.must("ip", "-n", h.ns, "addr", "add", h.IP+"/24", "dev", "eth0")
	l.must("ip", "-n", h.ns, "link", "set", "eth0", "up")
	l.must("ip", "-n", h.ns, "link", "set", "lo", "up")
	return h
}

// Wrap is the command that runs a program on h: ip netns exec, which
// executes the program in place (signals reach it).
func (h *Host) Wrap() []string {
	if h.ns == "" {
		return nil
	}
	return []string{"ip", "netns", "exec", h.ns}
}

// Addr is h's address with port.
func (h *Host) Addr(port int) string { return h.IP + ":" + strconv.Itoa(port) }

// iptables runs iptables in h's namespace.
func (h *Host) iptables(args ...string) error {
	cmd := append(h.Wrap(), append([]string{"iptables", "-w"}, args...)...)
	out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v %s", strings.Join(cmd, " "), err, out)
	}
	return nil
}

// rules inserts the iptables rules (each an argument list after the
// chain) in h and returns a heal function that deletes them.
func (h *Host) rules(tb testing.TB, rules [][]string) (heal func()) {
	tb.Helper()
	for _, r := range rules {
		if err := h.iptables(append([]string{"-I"}, r...)...); err != nil {
			tb.Fatal(err)
		}
	}
	var once sync.Once
	heal = func() {
		once.Do(func() {
			for _, r := range rules {
				if err := h.iptables(append([]string{"-D"}, r...)...); err != nil {
					tb.Error(err)
				}
			}
		})
	}
	tb.Cleanup(heal)
	return heal
}

// Cut drops every packet between a and b (port 0) or between a and b's
// port (TCP, either side may have opened the connection), in a's
// namespace, until heal. Connections stay open and hang, as behind a
// failed switch: no reset, no ICMP.
func Cut(tb testing.TB, a, b *Host, port int) (heal func()) {
	tb.Helper()
	out := []string{"OUTPUT", "-d", b.IP}
	in := []string{"INPUT", "-s", b.IP}
	if port > 0 {
		p := strconv.Itoa(port)
		out = append(out, "-p", "tcp", "--dport", p)
		in = append(in, "-p", "tcp", "--sport", p)
	}
	return a.rules(tb, [][]string{append(out, "-j", "DROP"), append(in, "-j", "DROP")})
}

// Loss drops pct percent of the packets between a and b, both ways, at
// random, in a's namespace, until heal.
func Loss(tb testing.TB, a, b *Host, pct float64) (heal func()) {
	tb.Helper()
	p := strconv.FormatFloat(pct/100, 'f', 4, 64)
	stat := []string{"-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"}
	return a.rules(tb, [][]string{
		append([]string{"OUTPUT", "-d", b.IP}, stat...),
		append([]string{"INPUT", "-s", b.IP}, stat...),
	})
}

func (l *Lab) must(name string, args ...string) {
	l.tb.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		l.tb.Fatalf("%s %s: %v %s", name, strings.Join(args, " "), err, out)
	}
}

// remove kills the processes left in the lab's namespaces and deletes
// them (the client host's veth goes with the hub's end).
func (l *Lab) remove() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.hosts {
		if h.ns == "" {
			continue
		}
		out, _ := exec.Command("ip", "netns", "pids", h.ns).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
		}
		exec.Command("ip", "netns", "del", h.ns).Run()
	}
	exec.Command("ip", "netns", "del", l.hub).Run()
}
