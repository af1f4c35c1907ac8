// Package devbroker runs the embedded Kafka-protocol broker
// (github.com/twmb/franz-go/pkg/kfake) for development, where no Kafka is
// installed: the all-in-one binary, cmd/devkafka (the role binaries' broker
// on a laptop) and the load test use it. Records live in memory unless a
// data directory is given. It is not for production.
package devbroker

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configures the broker.
type Options struct {
	// Addr is the listen address; port 0 picks a free one. The host is
	// the address the broker listens on and gives clients in its metadata
	// (one interface, no wildcard); empty means 127.0.0.1.
	Addr string
	// Topic, when set, is created at start with Partitions partitions;
	// otherwise logic creates the room topic at its start-up.
	Topic      string
	Partitions int
	// DataDir, when set, keeps topics, records and group offsets across
	// restarts.
	DataDir string
}

// Start starts a single broker and returns it with its address.
func Start(o Options) (*kfake.Cluster, string, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(o.Addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p < 0 {
		return nil, "", fmt.Errorf("embedded kafka: address %q: want host:port", o.Addr)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || ip.IsUnspecified()) {
		return nil, "", fmt.Errorf("embedded kafka: address %q: want the IP address of one interface", o.Addr)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		// Consumer groups may use session timeouts down to one second, as
		// quick runs and tests do; a real broker's minimum is 6 s.
		kfake.GroupMinSessionTimeout(time.Second),
	}
	if p > 0 {
		opts = append(opts, kfake.Ports(p))
	}
	if host != "" {
		// kfake listens on 127.0.0.1; its listener is asked for here and
		// opened on host instead, which its metadata then names.
		opts = append(opts, kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, port, _ := net.SplitHostPort(addr)
			return net.Listen(network, net.JoinHostPort(host, port))
		}))
	}
	if o.Topic != "" {
		opts = append(opts, kfake.SeedTopics(int32(max(o.Partitions, 1)), o.Topic), kfake.AllowAutoTopicCreation())
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, "", fmt.Errorf("start embedded kafka: %w", err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return nil, "", fmt.Errorf("embedded kafka listens on %v, want one address", addrs)
	}
	return c, addrs[0], nil
}
