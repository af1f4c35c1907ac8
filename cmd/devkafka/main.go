// Command devkafka runs a Kafka-protocol broker in memory for development
// (franz-go's kfake), so the role binaries run on a machine without Kafka:
//
//	go run ./cmd/devkafka            # listens on 127.0.0.1:9092
//	go run ./cmd/logic -config configs/logic.yaml
//
// logic creates the room topic at its start-up as it would on a real
// broker. Records and consumer-group offsets are gone when it stops, unless
// -data names a directory. It is not for production.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/danmaku/danmaku/internal/devbroker"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "listen address, the IP of one interface (the broker gives it to clients); port 0 picks a free one")
	data := flag.String("data", "", "directory keeping topics, records and offsets across restarts; empty: memory only")
	flag.Parse()
	b, err := devbroker.Start(devbroker.Options{Addr: *addr, DataDir: *data})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devkafka:", err)
		os.Exit(1)
	}
	// One line a script can wait for and read the address from.
	fmt.Fprintf(os.Stderr, "devkafka: Kafka-protocol broker listening on %s (in memory: for development only)\n", b.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	b.Stop()
	fmt.Fprintln(os.Stderr, "devkafka: stopped")
}
