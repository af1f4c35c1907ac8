package job

import "testing"

func TestOffsetsCommitOnlyFinishedPrefix(t *testing.T) {
	o := newOffsets()
	for off := int64(10); off < 15; off++ {
		o.consumed(0, off, 0)
	}
	o.consumed(1, 100, 0)
	if c := o.commits(); len(c) != 0 {
		t.Fatalf("nothing finished yet, commits %v", c)
	}
	o.finished(0, 12)
	o.finished(0, 11)
	if c := o.commits(); len(c) != 0 {
		t.Fatalf("offset 10 still pending, commits %v", c)
	}
	o.finished(0, 10)
	if c := o.commits(); c[0] != 13 || len(c) != 1 {
		t.Fatalf("commits %v, want partition 0 at 13", c)
	}
	if c := o.commits(); len(c) != 0 {
		t.Fatalf("repeated commit %v", c)
	}
	// A gap in offsets (compaction) does not block.
	o.finished(0, 13)
	o.finished(0, 14)
	o.consumed(0, 20, 0)
	o.finished(0, 20)
	if c := o.commits(); c[0] != 21 {
		t.Fatalf("after gap: %v", c)
	}
	// A rewind (partition given back after a rebalance) restarts tracking.
	o.consumed(1, 90, 0)
	o.finished(1, 100) // stale, ignored
	o.finished(1, 90)
	if c := o.commits(); c[1] != 91 {
		t.Fatalf("after rewind: %v", c)
	}
}
