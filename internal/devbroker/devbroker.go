// Package devbroker runs the embedded Kafka-protocol broker (franz-go's
// kfake) where no Kafka is installed: the all-in-one binary, cmd/devkafka
// (the role binaries' broker on a laptop), the load test and the tests
// (through internal/testkit/kafkabroker). Records live in memory unless a
// data directory is given. It is not for production.
//
// A Broker can be stopped and started again on the same port with the same
// options, so a test can take "Kafka" away and bring it back. Without
// DataDir a restart starts empty: topics, records and committed group
// offsets are gone, and the seeded topics are created again.
package devbroker

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configures the broker.
type Options struct {
	// Addr is the listen address; port 0 picks a free one. The host is
	// the address the broker listens on and gives clients in its metadata
	// (one interface, no wildcard); empty means 127.0.0.1.
	Addr string
	// Topics are created at start (and again at each Restart, a no-op when
	// DataDir kept them); otherwise logic creates the room topic at its
	// start-up.
	Topics []Topic
	// AutoCreate lets metadata requests create missing topics, which
	// kafka-go asks for when Writer.AllowAutoTopicCreation is set; they
	// get DefaultPartitions partitions (kfake's default when 0).
	AutoCreate        bool
	DefaultPartitions int
	// DataDir, when set, keeps topics, records and group offsets across
	// restarts.
	DataDir string
	// MinSessionTimeout is the smallest consumer-group session timeout the
	// broker accepts; 0 means one second, as quick runs and tests use (a
	// real broker's minimum is 6 s).
	MinSessionTimeout time.Duration
}

// Topic is a topic created at start.
type Topic struct {
	Name       string
	Partitions int // at least 1
}

// Broker is one embedded single-node Kafka cluster.
type Broker struct {
	opts Options
	host string
	port int // fixed after the first start, so Restart keeps the address

	mu      sync.Mutex     // guards cluster
	cluster *kfake.Cluster // nil while stopped
}

// Start starts a single broker. The caller must Stop it.
func Start(o Options) (*Broker, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(o.Addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p < 0 {
		return nil, fmt.Errorf("embedded kafka: address %q: want host:port", o.Addr)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || ip.IsUnspecified()) {
		return nil, fmt.Errorf("embedded kafka: address %q: want the IP address of one interface", o.Addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if o.MinSessionTimeout == 0 {
		o.MinSessionTimeout = time.Second
	}
	b := &Broker{opts: o, host: host, port: p}
	if err := b.start(1); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Broker) kfakeOpts() []kfake.Opt {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(b.opts.MinSessionTimeout),
	}
	if b.port > 0 {
		opts = append(opts, kfake.Ports(b.port))
	}
	if b.host != "127.0.0.1" {
		// kfake listens on 127.0.0.1; its listener is asked for here and
		// opened on host instead, which its metadata then names.
		host := b.host
		opts = append(opts, kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, port, _ := net.SplitHostPort(addr)
			return net.Listen(network, net.JoinHostPort(host, port))
		}))
	}
	for _, t := range b.opts.Topics {
		opts = append(opts, kfake.SeedTopics(int32(max(t.Partitions, 1)), t.Name))
	}
	if b.opts.AutoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if b.opts.DefaultPartitions > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(b.opts.DefaultPartitions))
	}
	if b.opts.DataDir != "" {
		opts = append(opts, kfake.DataDir(b.opts.DataDir))
	}
	return opts
}

// start starts the cluster, trying up to attempts times: right after a
// stop the old listener's port can take a moment to be free again.
func (b *Broker) start(attempts int) error {
	var (
		c   *kfake.Cluster
		err error
	)
	for i := 0; i < attempts; i++ {
		if c, err = kfake.NewCluster(b.kfakeOpts()...); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("start embedded kafka: %w", err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return fmt.Errorf("embedded kafka listens on %v, want one address", addrs)
	}
	_, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		c.Close()
		return fmt.Errorf("embedded kafka address %q: %w", addrs[0], err)
	}
	b.port, _ = strconv.Atoi(port)
	b.mu.Lock()
	b.cluster = c
	b.mu.Unlock()
	return nil
}

// Addr is the broker's host:port; it stays the same across Restart.
func (b *Broker) Addr() string { return net.JoinHostPort(b.host, strconv.Itoa(b.port)) }

// Brokers returns Addr as a bootstrap list.
func (b *Broker) Brokers() []string { return []string{b.Addr()} }

// Cluster returns the running kfake cluster, nil while stopped.
func (b *Broker) Cluster() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cluster
}

// Stop shuts the broker down and drops every client connection. Safe to
// call more than once.
func (b *Broker) Stop() {
	b.mu.Lock()
	c := b.cluster
	b.cluster = nil
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Restart stops the broker if it runs and starts it again on the same
// address with the same options.
func (b *Broker) Restart() error {
	b.Stop()
	return b.start(50)
}
