package danmaku_test

import (
	"testing"

	"github.com/danmaku/danmaku"
)

// A canary record decodes back to the canary, with no room and no
// message; a bad one is EINVALID naming its field.
func TestCanaryEnvelope(t *testing.T) {
	c := danmaku.Canary{ID: "canary-1", Partition: 3, Partitions: 16, TS: 1730620801123}
	b, err := danmaku.MarshalCanary(c)
	if err != nil {
		t.Fatal(err)
	}
	e, err := danmaku.UnmarshalEnvelope(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if e.Canary == nil || *e.Canary != c || e.Room != "" || e.Msg.ID != "" || e.V != danmaku.CanaryEnvelopeVersion {
		t.Errorf("%s decoded to %+v", b, e)
	}
	for name, tc := range map[string]struct {
		c     danmaku.Canary
		field string
	}{
		"no id":         {danmaku.Canary{Partition: 0, Partitions: 1, TS: 1}, "canary.id"},
		"no partitions": {danmaku.Canary{ID: "c", TS: 1}, "canary.partitions"},
		"beyond":        {danmaku.Canary{ID: "c", Partition: 4, Partitions: 4, TS: 1}, "canary.partition"},
		"negative":      {danmaku.Canary{ID: "c", Partition: -1, Partitions: 4, TS: 1}, "canary.partition"},
		"no time":       {danmaku.Canary{ID: "c", Partitions: 4}, "canary.ts"},
	} {
		_, err := danmaku.MarshalCanary(tc.c)
		if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != tc.field {
			t.Errorf("%s: %v, want EINVALID on %s", name, err, tc.field)
		}
	}
	if _, err := danmaku.UnmarshalEnvelope([]byte(`{"v":4,"canary":{"id":"c","partition":9,"partitions":4,"ts":1}}`)); danmaku.ErrorCode(err) != danmaku.EINVALID {
		t.Errorf("a canary beyond its partitions decoded: %v", err)
	}
}
