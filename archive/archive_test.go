package archive_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/archive"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/pgserver"
	"github.com/danmaku/danmaku/internal/testkit/vodstoretest"
	"github.com/danmaku/danmaku/vodstore"
)

func TestMain(m *testing.M) { os.Exit(pgserver.Run(m)) }

// engines runs fn once per database engine, each on an empty database.
func engines(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("postgres", func(t *testing.T) { fn(t, pgserver.FreshDSN(t)) })
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite:"+filepath.Join(t.TempDir(), "archive.db")) })
}

type env struct {
	t     *testing.T
	kafka config.Kafka
	store vodstore.Store
	dsn   string
}

func newEnv(t *testing.T, dsn string) *env {
	b := kafkabroker.Start(t, kafkabroker.MinSessionTimeout(time.Second), kafkabroker.Topic("rooms", 2))
	k := config.DefaultKafka()
	k.Brokers, k.Topic, k.Partitions = b.Brokers(), "rooms", 2
	return &env{t: t, kafka: k, store: openStore(t, dsn), dsn: dsn}
}

func openStore(t *testing.T, dsn string) vodstore.Store { return vodstoretest.MustOpen(t, dsn) }

type running struct {
	*archive.Archive
	reg *prometheus.Registry
}

// start runs an archive of group on e's broker and database until the
// test ends.
func (e *env) start(group string, tune func(*archive.Config)) *running {
	e.t.Helper()
	cfg := archive.DefaultConfig()
	cfg.DSN, cfg.Group = e.dsn, group
	cfg.BatchWait = 20 * time.Millisecond
	cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.RebalanceTimeout = 200*time.Millisecond, time.Second, time.Second
	if tune != nil {
		tune(&cfg)
	}
	reg := prometheus.NewRegistry()
	a, err := archive.New(cfg, archive.Deps{Kafka: e.kafka, Store: e.store, Registerer: reg})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { stop(e.t, a) })
	return &running{a, reg}
}

func stop(t *testing.T, a *archive.Archive) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Error(err)
	}
}

func (e *env) write(recs ...kafka.Message) {
	e.t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(e.kafka.Brokers...), Topic: e.kafka.Topic, Balancer: &kafka.Hash{},
		BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, recs...); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

func msg(t *testing.T, room, id string, ts int64) kafka.Message {
	v, err := danmaku.MarshalEnvelope(room, danmaku.Message{ID: id, UID: 9, Name: "n", Content: "c " + id, TS: ts})
	if err != nil {
		t.Fatal(err)
	}
	return kafka.Message{Key: []byte(room), Value: v}
}

func event(t *testing.T, ev danmaku.Event) kafka.Message {
	ev.ID = testkit.Uniq("ev")
	v, err := danmaku.MarshalEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	return kafka.Message{Key: []byte(ev.Room), Value: v}
}

// visible returns "id@offset" of the stream's visible comments.
func (e *env) visible(room, stream string) ([]string, vodstore.Stream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := e.store.Stream(ctx, room, stream)
	if err != nil {
		return nil, st, err
	}
	cs, err := e.store.Comments(ctx, st, 0, 1<<31-1)
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s@%d", c.ID, c.Offset))
	}
	return out, st, err
}

func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// A stream holds exactly the comments written between its start and end
// events, at their offsets from its start; a deletion hides one; the
// comments outside any stream are not stored; a client's retry (same id,
// later time) is stored once; the lag returns to 0.
func TestArchiveStream(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		room := testkit.Uniq("r")
		t0 := time.Now().UnixMilli()
		e.write(msg(t, room, "before", t0),
			event(t, danmaku.Event{Op: danmaku.OpStreamStart, Room: room, Stream: "s1", At: t0 + 1000}),
			msg(t, room, "m1", t0+1500), msg(t, room, "m2", t0+43000), msg(t, room, "m1", t0+44000),
			event(t, danmaku.Event{Op: danmaku.OpDel, Room: room, IDs: []string{"m1"}}),
			msg(t, room, "m3", t0+50000),
			event(t, danmaku.Event{Op: danmaku.OpStreamEnd, Room: room, At: t0 + 60000}),
			msg(t, room, "after", t0+61000))
		a := e.start("g1", nil)
		want := []string{"m2@42000", "m3@49000"}
		testkit.SucceedsSoon(t, 20*time.Second, func() error {
			got, st, err := e.visible(room, "s1")
			if err != nil || !reflect.DeepEqual(got, want) || st.Live() || st.Count != 3 {
				return fmt.Errorf("stream %+v: visible %v, %v; want %v, ended, 3 stored", st, got, err, want)
			}
			return nil
		})
		testkit.SucceedsSoon(t, 10*time.Second, func() error {
			if lag := value(t, a.reg, "danmaku_archive_lag_messages"); lag != 0 {
				return fmt.Errorf("lag %v", lag)
			}
			return nil
		})
		for kind, n := range map[string]float64{"comment": 3, "outside_stream": 2, "retry": 1, "event": 3} {
			if got := value(t, a.reg, "danmaku_archive_records_total", "kind", kind); got != n {
				t.Errorf("records %s: %v, want %v", kind, got, n)
			}
		}
	})
}

// Every record again (a second group on the same database stands for a
// redelivery of all of them) stores nothing twice and changes no stream.
func TestArchiveRedelivery(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		room := testkit.Uniq("r")
		t0 := time.Now().UnixMilli()
		recs := []kafka.Message{event(t, danmaku.Event{Op: danmaku.OpStreamStart, Room: room, Stream: "s1", At: t0})}
		for i := range 50 {
			recs = append(recs, msg(t, room, fmt.Sprint("m", i), t0+int64(i)*100))
		}
		recs = append(recs, event(t, danmaku.Event{Op: danmaku.OpStreamEnd, Room: room, At: t0 + 9000}),
			event(t, danmaku.Event{Op: danmaku.OpStreamStart, Room: room, Stream: "s2", At: t0 + 10000}),
			msg(t, room, "n1", t0+10500))
		e.write(recs...)
		first := e.start("g1", nil)
		check := func() error {
			got1, st1, err1 := e.visible(room, "s1")
			got2, st2, err2 := e.visible(room, "s2")
			if err1 != nil || err2 != nil || len(got1) != 50 || st1.Count != 50 || st1.Live() || !reflect.DeepEqual(got2, []string{"n1@500"}) || st2.Count != 1 || !st2.Live() {
				return fmt.Errorf("s1 %+v %d %v; s2 %+v %v %v", st1, len(got1), err1, st2, got2, err2)
			}
			return nil
		}
		testkit.SucceedsSoon(t, 20*time.Second, check)
		stop(t, first.Archive)
		again := e.start("g2", nil)
		testkit.SucceedsSoon(t, 20*time.Second, func() error {
			if n := value(t, again.reg, "danmaku_archive_duplicates_total"); n != 51 {
				return fmt.Errorf("duplicates %v, want 51", n)
			}
			return nil
		})
		if err := check(); err != nil {
			t.Fatal(err)
		}
		if n := value(t, again.reg, "danmaku_archive_stored_total"); n != 0 {
			t.Errorf("stored %v on redelivery, want 0", n)
		}
	})
}

// With auto_silence a comment starts a stream, and a silence ends it: the
// next comment starts another.
func TestArchiveAutoStreams(t *testing.T) {
	e := newEnv(t, "sqlite:"+filepath.Join(t.TempDir(), "a.db"))
	room := testkit.Uniq("r")
	t0 := time.Now().UnixMilli()
	e.write(msg(t, room, "a1", t0), msg(t, room, "a2", t0+500), msg(t, room, "b1", t0+5000))
	e.start("g1", func(c *archive.Config) { c.AutoSilence = 2 * time.Second })
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		sts, err := e.store.Streams(context.Background(), room, 10)
		if err != nil || len(sts) != 2 {
			return fmt.Errorf("streams %+v, %v; want 2", sts, err)
		}
		first, second := sts[1], sts[0]
		if first.Live() || first.Count != 2 || !first.Auto || first.Start != t0 || first.End != t0+501 {
			return fmt.Errorf("first %+v", first)
		}
		if second.Count != 1 || second.Start != t0+5000 {
			return fmt.Errorf("second %+v", second)
		}
		if second.Live() {
			return fmt.Errorf("second still live after its silence: %+v", second)
		}
		return nil
	})
}

// Delivery canaries (logic writes one per partition every second) are
// counted and skipped: they start no stream, also with auto streams on, and
// are never stored.
func TestArchiveSkipsCanaries(t *testing.T) {
	e := newEnv(t, "sqlite:"+filepath.Join(t.TempDir(), "a.db"))
	room := testkit.Uniq("r")
	t0 := time.Now().UnixMilli()
	var recs []kafka.Message
	for p := range 2 {
		v, err := danmaku.MarshalCanary(danmaku.Canary{ID: testkit.Uniq("canary-"), Partition: p, Partitions: 2, TS: t0})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, kafka.Message{Key: []byte(fmt.Sprint("k", p)), Value: v})
	}
	e.write(append(recs, msg(t, room, "a1", t0))...)
	a := e.start("g1", func(c *archive.Config) { c.AutoSilence = time.Hour })
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := value(t, a.reg, "danmaku_archive_records_total", "kind", "canary"); n != 2 {
			return fmt.Errorf("%v canaries counted, want 2", n)
		}
		if n := value(t, a.reg, "danmaku_archive_stored_total"); n != 1 {
			return fmt.Errorf("%v comments stored, want 1", n)
		}
		return nil
	})
	if sts, err := e.store.Streams(context.Background(), "", 10); err != nil || len(sts) != 0 {
		t.Fatalf("streams of the canaries' empty room: %+v %v", sts, err)
	}
	if n := value(t, a.reg, "danmaku_archive_records_total", "kind", "invalid"); n != 0 {
		t.Fatalf("%v records invalid", n)
	}
}

// A moderator's comment and a high-priority one are stored with their
// flags, which sampling over a segment's cap always keeps.
func TestArchiveFlags(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		room := testkit.Uniq("r")
		t0 := time.Now().UnixMilli()
		record := func(m danmaku.Message) kafka.Message {
			v, err := danmaku.MarshalEnvelope(room, m)
			if err != nil {
				t.Fatal(err)
			}
			return kafka.Message{Key: []byte(room), Value: v}
		}
		e.write(event(t, danmaku.Event{Op: danmaku.OpStreamStart, Room: room, Stream: "s1", At: t0}),
			record(danmaku.Message{ID: "plain", UID: 1, Content: "a", TS: t0 + 1}),
			record(danmaku.Message{ID: "mod", UID: 2, Content: "b", TS: t0 + 2, Mod: true}),
			record(danmaku.Message{ID: "high", UID: 3, Content: "c", TS: t0 + 3, Priority: danmaku.PriorityHigh}),
			event(t, danmaku.Event{Op: danmaku.OpStreamEnd, Room: room, At: t0 + 10}))
		e.start("g1", nil)
		want := map[string]int16{"plain": 0, "mod": vodstore.FlagModerator, "high": vodstore.FlagHigh}
		testkit.SucceedsSoon(t, 20*time.Second, func() error {
			st, err := e.store.Stream(context.Background(), room, "s1")
			if err != nil || st.Live() {
				return fmt.Errorf("stream %+v %v", st, err)
			}
			cs, err := e.store.Comments(context.Background(), st, 0, vodstore.SegmentMS)
			got := map[string]int16{}
			for _, c := range cs {
				got[c.ID] = c.Flags
			}
			if err != nil || !reflect.DeepEqual(got, want) {
				return fmt.Errorf("flags %v (%v), want %v", got, err, want)
			}
			return nil
		})
	})
}
