package devbroker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker listens on the address it is given and names that address in
// its metadata, so clients on other hosts reach it: here 127.0.0.2, a
// loopback address other than the default. A wildcard or a name is
// refused: the broker must name one address clients can dial.
func TestListensOnGivenAddress(t *testing.T) {
	b, err := Start(Options{Addr: "127.0.0.2:0", Topics: []Topic{{"t", 2}}, AutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	addr := b.Addr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "127.0.0.2" {
		t.Fatalf("metadata names brokers %+v, want one on 127.0.0.2 (listening on %s)", resp.Brokers, addr)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"0.0.0.0:0", "localhost:0", "127.0.0.1"} {
		if b, err := Start(Options{Addr: bad}); err == nil {
			b.Stop()
			t.Errorf("Start(%q) accepted", bad)
		}
	}
}
