package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// runKafka serves the embedded Kafka-protocol broker on addr (loopback
// only) until ctx ends. Benchmark scripts use it where no Kafka broker can
// be installed; the services talk to it like to a real broker.
func runKafka(ctx context.Context, addr, dataDir, topic string, partitions int) int {
	_, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p <= 0 {
		fmt.Fprintf(os.Stderr, "loadtest: -kafka-embedded %q: want host:port with a fixed port\n", addr)
		return 2
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(p),
		kfake.SeedTopics(int32(partitions), topic),
		kfake.AllowAutoTopicCreation(),
		// The job's session timeout may be set lower than kfake's 6 s
		// minimum in quick runs.
		kfake.GroupMinSessionTimeout(time.Second),
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: embedded kafka:", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "embedded kafka listening on %v (topic %s, %d partitions, data %q)\n", c.ListenAddrs(), topic, partitions, dataDir)
	<-ctx.Done()
	c.Close()
	return 0
}
