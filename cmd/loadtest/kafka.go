package main

import (
	"context"
	"fmt"
	"os"

	"github.com/danmaku/danmaku/internal/devbroker"
)

// runKafka serves the embedded Kafka-protocol broker on addr (loopback
// only) until ctx ends. Benchmark scripts use it where no Kafka broker can
// be installed; the services talk to it like to a real broker.
func runKafka(ctx context.Context, addr, dataDir, topic string, partitions int) int {
	o := devbroker.Options{Addr: addr, DataDir: dataDir}
	if topic != "" {
		o.Topics, o.AutoCreate = []devbroker.Topic{{Name: topic, Partitions: partitions}}, true
	}
	b, err := devbroker.Start(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: -kafka-embedded:", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "embedded kafka listening on %s (topic %s, %d partitions, data %q)\n", b.Addr(), topic, partitions, dataDir)
	<-ctx.Done()
	b.Stop()
	return 0
}
