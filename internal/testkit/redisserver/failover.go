package redisserver

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
)

// ClusterSpec shapes a cluster of a test's own (NewCluster).
type ClusterSpec struct {
	Masters  int // default 3
	Replicas int // replicas per master
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// unreachable before it is failed and a replica takes over. Default
	// 1500 ms.
	NodeTimeout time.Duration
}

// NewCluster starts a cluster that belongs to tb alone, for tests that kill
// its nodes: spec.Masters masters, each with spec.Replicas replicas that are
// in sync when it returns. It is stopped when tb ends.
//
// Replicas take over whatever their data age (cluster-replica-validity-factor
// 0), so a loaded test machine that delayed the replication stream does not
// leave a shard without a master. Coverage stays required, as in Redis's
// default: while a master is failed and not yet replaced, every node
// refuses commands (CLUSTERDOWN).
func NewCluster(tb testing.TB, spec ClusterSpec) *Cluster {
	tb.Helper()
	c, err := startCluster(spec)
	if err != nil {
		tb.Fatalf("redis cluster: %v", err)
	}
	tb.Cleanup(c.Stop)
	return c
}

func startCluster(spec ClusterSpec) (*Cluster, error) {
	if spec.Masters == 0 {
		spec.Masters = 3
	}
	if spec.NodeTimeout == 0 {
		spec.NodeTimeout = 1500 * time.Millisecond
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found in PATH (Debian: apt-get install redis-tools): %w", err)
	}
	c := &Cluster{}
	for i := 0; i < spec.Masters*(1+spec.Replicas); i++ {
		s, err := StartServer("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(spec.NodeTimeout.Milliseconds(), 10),
			"--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.servers = append(c.servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(spec.Replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	if err := c.waitHealthy(20*time.Second, spec.Masters, spec.Masters*spec.Replicas); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Node is one node of the cluster as CLUSTER NODES describes it.
type Node struct {
	ID, Addr string
	Master   bool
	Failed   bool   // flagged fail (not fail?, the suspicion)
	MasterID string // of a replica
	Slots    []SlotRange
}

// SlotRange is a range of hash slots, both ends included.
type SlotRange struct{ From, To int }

// Server returns the server listening on addr, nil if none of the cluster.
func (c *Cluster) Server(addr string) *Server {
	for _, s := range c.servers {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// Nodes reads CLUSTER NODES from the node at addr.
func (c *Cluster) Nodes(addr string) ([]Node, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, MaxRetries: -1})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	out, err := rc.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return parseNodes(out)
}

// parseNodes parses CLUSTER NODES: "id ip:port@bus flags master ping pong
// epoch link slot...".
func parseNodes(out string) ([]Node, error) {
	var nodes []Node
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("cluster nodes: bad line %q", line)
		}
		n := Node{ID: f[0], Addr: strings.SplitN(f[1], "@", 2)[0]}
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master":
				n.Master = true
			case "fail":
				n.Failed = true
			}
		}
		if f[3] != "-" {
			n.MasterID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being migrated
			}
			from, to, _ := strings.Cut(s, "-")
			a, err := strconv.Atoi(from)
			if err != nil {
				return nil, fmt.Errorf("cluster nodes: bad slot %q", s)
			}
			b := a
			if to != "" {
				if b, err = strconv.Atoi(to); err != nil {
					return nil, fmt.Errorf("cluster nodes: bad slot %q", s)
				}
			}
			n.Slots = append(n.Slots, SlotRange{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// MasterOf returns the address of the master serving slot in nodes; "" when
// no node that is not failed serves it.
func MasterOf(nodes []Node, slot int) string {
	for _, n := range nodes {
		if !n.Master || n.Failed {
			continue
		}
		for _, r := range n.Slots {
			if slot >= r.From && slot <= r.To {
				return n.Addr
			}
		}
	}
	return ""
}

// Slot returns the hash slot of key (CRC16 of its hash tag, as Redis
// Cluster computes it).
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// Master returns the server that is master of slot now, asking the
// running nodes.
func (c *Cluster) Master(slot int) (*Server, error) {
	var lastErr error
	for _, s := range c.servers {
		if !s.Running() {
			continue
		}
		nodes, err := c.Nodes(s.Addr)
		if err != nil {
			lastErr = err
			continue
		}
		if addr := MasterOf(nodes, slot); addr != "" {
			return c.Server(addr), nil
		}
		lastErr = fmt.Errorf("no master serves slot %d", slot)
	}
	return nil, fmt.Errorf("master of slot %d: %v", slot, lastErr)
}

// ReplicaOf returns a running server that replicates master.
func (c *Cluster) ReplicaOf(master *Server) (*Server, error) {
	nodes, err := c.Nodes(master.Addr)
	if err != nil {
		return nil, err
	}
	var id string
	for _, n := range nodes {
		if n.Addr == master.Addr {
			id = n.ID
		}
	}
	for _, n := range nodes {
		if s := c.Server(n.Addr); !n.Master && n.MasterID == id && s != nil && s.Running() {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no replica of %s", master.Addr)
}

// Masters returns the addresses of the current masters, ordered as the
// nodes were started.
func (c *Cluster) Masters() ([]string, error) {
	for _, s := range c.servers {
		if !s.Running() {
			continue
		}
		nodes, err := c.Nodes(s.Addr)
		if err != nil {
			continue
		}
		master := map[string]bool{}
		for _, n := range nodes {
			if n.Master && !n.Failed && len(n.Slots) > 0 {
				master[n.Addr] = true
			}
		}
		var addrs []string
		for _, s := range c.servers {
			if master[s.Addr] {
				addrs = append(addrs, s.Addr)
			}
		}
		return addrs, nil
	}
	return nil, fmt.Errorf("no node answers")
}

// WaitPromoted waits, after the master of slot was killed, until every
// running node names the same other running node master of slot and
// reports cluster_state:ok, and returns that node.
func (c *Cluster) WaitPromoted(slot int, old *Server, d time.Duration) (*Server, error) {
	var promoted *Server
	err := testkit.Soon(d, func() error {
		promoted = nil
		for _, s := range c.servers {
			if !s.Running() {
				continue
			}
			nodes, err := c.Nodes(s.Addr)
			if err != nil {
				return err
			}
			addr := MasterOf(nodes, slot)
			if addr == "" || addr == old.Addr {
				return fmt.Errorf("%s: slot %d served by %q", s.Addr, slot, addr)
			}
			if promoted != nil && promoted.Addr != addr {
				return fmt.Errorf("nodes disagree on the master of slot %d: %s and %s", slot, promoted.Addr, addr)
			}
			promoted = c.Server(addr)
			if err := clusterOK(s.Addr); err != nil {
				return err
			}
		}
		if promoted == nil {
			return fmt.Errorf("no node answers")
		}
		return nil
	})
	return promoted, err
}

// Rejoin restarts a killed node on its address with its cluster
// configuration (it has no data: nothing is persisted) and waits until it
// is a replica of master in sync, and every running node says the cluster
// is ok.
func (c *Cluster) Rejoin(s, master *Server, d time.Duration) error {
	if err := s.Restart(); err != nil {
		return err
	}
	return testkit.Soon(d, func() error {
		if err := inSyncReplica(s.Addr, master.Addr); err != nil {
			return err
		}
		for _, n := range c.servers {
			if n.Running() {
				if err := clusterOK(n.Addr); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// waitHealthy waits until every node says cluster_state:ok, the cluster has
// masters masters and replicas replicas, and every replica is in sync.
func (c *Cluster) waitHealthy(d time.Duration, masters, replicas int) error {
	return testkit.Soon(d, func() error {
		for _, s := range c.servers {
			if err := clusterOK(s.Addr); err != nil {
				return err
			}
		}
		nodes, err := c.Nodes(c.Addrs[0])
		if err != nil {
			return err
		}
		byID := map[string]string{}
		for _, n := range nodes {
			byID[n.ID] = n.Addr
		}
		m, r := 0, 0
		for _, n := range nodes {
			if n.Master {
				m++
				continue
			}
			r++
			if err := inSyncReplica(n.Addr, byID[n.MasterID]); err != nil {
				return err
			}
		}
		if m != masters || r != replicas {
			return fmt.Errorf("cluster of %d masters and %d replicas, want %d and %d", m, r, masters, replicas)
		}
		return nil
	})
}

// inSyncReplica reports an error unless the node at addr is a replica of
// master with its link up.
func inSyncReplica(addr, master string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := rc.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	host, port, _ := strings.Cut(master, ":")
	for _, want := range []string{"role:slave", "master_host:" + host, "master_port:" + port, "master_link_status:up"} {
		if !strings.Contains(info, want+"\r\n") {
			return fmt.Errorf("%s is not a replica of %s in sync: want %s in %q", addr, master, want, info)
		}
	}
	return nil
}

func clusterOK(addr string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := rc.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("%s: cluster not ok", addr)
	}
	return nil
}
