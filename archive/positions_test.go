package archive

import (
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
)

// TestPosBookCap: positions whose comments do not come are held up to the
// book's bound, oldest dropped first, and their records still commit.
func TestPosBookCap(t *testing.T) {
	b := newPosBook()
	b.max = 10
	dropped := 0
	for i := range 8 {
		ids := []string{fmt.Sprintf("m%da", i), fmt.Sprintf("m%db", i)}
		m := kafka.Message{Partition: i % 2, Offset: int64(i / 2), Time: time.Now()}
		dropped += b.add(m, danmaku.Positions{Room: "r", Pos: int64(1 + 2*i), IDs: ids})
		if len(b.entries) > b.max {
			t.Fatalf("after record %d: %d positions held, bound %d", i, len(b.entries), b.max)
		}
	}
	if dropped != 6 || len(b.entries) != 10 {
		t.Fatalf("dropped %d, held %d; want 6 and 10", dropped, len(b.entries))
	}
	for i := range 8 {
		_, _, ok := b.get("r", fmt.Sprintf("m%da", i))
		if want := i >= 3; ok != want {
			t.Errorf("position of record %d held: %v, want %v", i, ok, want)
		}
	}
	if pos, _, ok := b.get("r", "m7b"); !ok || pos != 16 {
		t.Errorf("newest position %d %v, want 16", pos, ok)
	}
	// The dropped records are settled: committed up to the first held.
	got := map[int]int64{}
	for _, m := range b.commits() {
		got[m.Partition] = m.Offset
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 0 {
		t.Errorf("commits %v, want partition 0 up to offset 1 and partition 1 up to 0", got)
	}
}
