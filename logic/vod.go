package logic

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/vodstore"
)

// Streams and their replay (VOD). A stream is a live session of a room:
// the admin API starts and ends it with an event on the room's partition,
// so the archive role, which consumes the partition in order, puts each
// comment in the stream it was sent during. The comments' offsets are
// their accepted time minus the stream's start.
//
// The read API, guarded like GET /logic/history (the token's rooms, a
// per-address limit of its own):
//
//	GET /logic/vod/streams?roomId=R[&limit=N]
//	GET /logic/vod/segment?roomId=R&streamId=S&seg=N
//	GET /logic/vod/density?roomId=R&streamId=S[&bucket=10s]
//
// Answers about an ended stream never change: they carry an ETag and
// Cache-Control immutable, and logic keeps the latest of them in memory.

// VODStore is what the VOD API reads: vodstore.Store implements it.
type VODStore interface {
	Streams(ctx context.Context, room string, limit int) ([]vodstore.Stream, error)
	Stream(ctx context.Context, room, id string) (vodstore.Stream, error)
	Comments(ctx context.Context, st vodstore.Stream, from, to int64) ([]vodstore.Comment, error)
	Density(ctx context.Context, st vodstore.Stream, bucketMS int64) ([]int64, error)
}

var _ VODStore = vodstore.Store(nil)

// Limits of the VOD API.
const (
	vodStreamsDefault = 20
	vodStreamsMax     = 100
	vodMaxSegment     = 10000 // 1,000 hours
	vodMinBucket      = time.Second
	vodMaxBuckets     = 100000
	vodCacheEntries   = 4096
	vodTimeout        = 5 * time.Second
)

// vod is the VOD API's state.
type vod struct {
	db    VODStore
	limit *readLimiter
	m     vodMetrics
	cache *vodCache
}

type vodMetrics struct {
	limited, cacheHits prometheus.Counter
	omitted            prometheus.Counter
}

func newVOD(cfg Config, store VODStore, reg prometheus.Registerer) *vod {
	v := &vod{db: store, limit: newReadLimiter(cfg.VODRateLimit, cfg.VODRateBurst), cache: newVODCache(cfg.VODLiveCache),
		m: vodMetrics{
			limited: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "danmaku", Subsystem: "logic", Name: "vod_rate_limited_total",
				Help: "GET /logic/vod/... requests refused (429) by the per-address limit (logic.vod_rate_limit)."}),
			cacheHits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "danmaku", Subsystem: "logic", Name: "vod_cache_hits_total",
				Help: "VOD answers served from logic's memory (ended streams, and live ones within logic.vod_live_cache)."}),
			omitted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "danmaku", Subsystem: "logic", Name: "vod_omitted_total",
				Help: "Comments left out of segment answers by logic.vod_segment_cap."}),
		}}
	reg.MustRegister(v.m.limited, v.m.cacheHits, v.m.omitted)
	return v
}

// validateVOD checks the VOD settings.
func (c *Config) validateVOD() error {
	switch {
	case c.VODSegmentCap < 100:
		return config.Invalid("vod_segment_cap", "must be at least 100, got %d", c.VODSegmentCap)
	case c.VODRateLimit < 0:
		return config.Invalid("vod_rate_limit", "must not be negative (0: off)")
	case c.VODRateLimit > 0 && c.VODRateBurst < 1:
		return config.Invalid("vod_rate_burst", "must be at least 1")
	case c.VODLiveCache < 0 || c.VODLiveCache > time.Minute:
		return config.Invalid("vod_live_cache", "must be from 0 (off) to 1m, got %v", c.VODLiveCache)
	}
	return nil
}

func (s *Server) handleVOD() {
	s.handle("/logic/vod/streams", "vod_streams", s.vodHandler(s.vodStreams))
	s.handle("/logic/vod/segment", "vod_segment", s.vodHandler(s.vodSegment))
	s.handle("/logic/vod/density", "vod_density", s.vodHandler(s.vodDensity))
}

// vodAnswer is a VOD answer: its JSON and whether it is final (about an
// ended stream).
type vodAnswer struct {
	v     any
	final bool
}

// vodHandler wraps a VOD read with the method check, the room's
// authorization, the per-address limit, the cache of final answers and
// the caching headers.
func (s *Server) vodHandler(read func(ctx context.Context, q vodQuery) (vodAnswer, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		q, err := parseVODQuery(r)
		if err == nil {
			err = s.authorizeRead(r, q.room)
		}
		if err == nil {
			err = s.limitVOD(w, r)
		}
		if err == nil && s.vod.db == nil {
			err = danmaku.Errorf(danmaku.ENOTFOUND, "path", "the VOD API is off: set logic.archive_dsn")
		}
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		key := r.URL.Path + "?" + q.key()
		e, hit, err := s.vod.cache.get(r.Context(), key, func(ctx context.Context) (*vodCacheEntry, error) {
			a, err := read(ctx, q)
			if err != nil {
				return nil, err
			}
			body, err := json.Marshal(a.v)
			if err != nil {
				return nil, err
			}
			return &vodCacheEntry{body: body, etag: etagOf(body), final: a.final}, nil
		})
		if err != nil {
			httpx.WriteError(w, vodError(err))
			return
		}
		if hit {
			s.vod.m.cacheHits.Inc()
		}
		writeVOD(w, r, e)
	}
}

// writeVOD answers with e: 304 when the client holds it already.
func writeVOD(w http.ResponseWriter, r *http.Request, e *vodCacheEntry) {
	h := w.Header()
	h.Set("ETag", e.etag)
	if e.final {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if r.Header.Get("If-None-Match") == e.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	w.Write(e.body)
}

func etagOf(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return `"` + strconv.FormatUint(h.Sum64(), 36) + `"`
}

// vodError maps a store error: a missing stream is 404, the rest 503.
func vodError(err error) error {
	if code := danmaku.ErrorCode(err); code != danmaku.EINTERNAL {
		return err
	}
	return danmaku.Unavailable("the archive's database does not answer; retry", err)
}

// limitVOD takes a read from the client address's VOD bucket.
func (s *Server) limitVOD(w http.ResponseWriter, r *http.Request) error {
	ok, retry := s.vod.limit.allow(s.proxies.clientIP(r))
	if ok {
		return nil
	}
	s.vod.m.limited.Inc()
	secs := max(int64((retry+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	return danmaku.Errorf(danmaku.ERATELIMIT, "",
		"VOD read limit of this client address exceeded: %g requests per second; retry in %d s", s.cfg.VODRateLimit, secs)
}

// vodQuery is the checked query of a VOD read.
type vodQuery struct {
	room, stream string
	seg          int
	limit        int
	bucket       time.Duration
}

func (q vodQuery) key() string {
	return fmt.Sprintf("%s|%s|%d|%d|%d", q.room, q.stream, q.seg, q.limit, q.bucket)
}

// parseVODQuery reads and checks the parameters of every VOD read; each
// route uses those it needs (streamId and seg are required by segment,
// streamId by density: checked there).
func parseVODQuery(r *http.Request) (vodQuery, error) {
	p := r.URL.Query()
	q := vodQuery{room: p.Get("roomId"), stream: p.Get("streamId"), seg: -1, limit: vodStreamsDefault, bucket: 10 * time.Second}
	if err := danmaku.CheckID("roomId", q.room); err != nil {
		return q, err
	}
	if _, ok := p["streamId"]; ok || r.URL.Path != "/logic/vod/streams" {
		if err := danmaku.CheckID("streamId", q.stream); err != nil {
			return q, err
		}
	}
	if v, ok := p["seg"]; ok || r.URL.Path == "/logic/vod/segment" {
		n, err := strconv.Atoi(p.Get("seg"))
		if err != nil || n < 0 || n > vodMaxSegment || len(v) > 1 {
			return q, danmaku.Errorf(danmaku.EINVALID, "seg", "seg must be a segment number from 0 to %d, got %q", vodMaxSegment, p.Get("seg"))
		}
		q.seg = n
	}
	if v, ok := p["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > vodStreamsMax {
			return q, danmaku.Errorf(danmaku.EINVALID, "limit", "limit must be an integer from 1 to %d, got %q", vodStreamsMax, v[0])
		}
		q.limit = n
	}
	if v, ok := p["bucket"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d < vodMinBucket || d%time.Millisecond != 0 || d > time.Hour {
			return q, danmaku.Errorf(danmaku.EINVALID, "bucket", "bucket must be a duration from 1s to 1h in whole milliseconds (10s, 1m), got %q", v[0])
		}
		q.bucket = d
	}
	return q, nil
}

func (s *Server) vodStreams(ctx context.Context, q vodQuery) (vodAnswer, error) {
	sts, err := s.vod.db.Streams(ctx, q.room, q.limit)
	if err != nil {
		return vodAnswer{}, err
	}
	resp := danmaku.VODStreamsResponse{RoomID: q.room, Streams: make([]danmaku.VODStream, 0, len(sts))}
	now := time.Now().UnixMilli()
	for _, st := range sts {
		end := st.End
		if st.Live() {
			end = max(now, st.Start)
		}
		resp.Streams = append(resp.Streams, danmaku.VODStream{ID: st.ID, Start: st.Start, End: st.End, Live: st.Live(),
			Count: st.Count, Segments: int((end-st.Start)/vodstore.SegmentMS) + 1})
	}
	return vodAnswer{v: resp}, nil
}

func (s *Server) vodSegment(ctx context.Context, q vodQuery) (vodAnswer, error) {
	st, err := s.vod.db.Stream(ctx, q.room, q.stream)
	if err != nil {
		return vodAnswer{}, err
	}
	from := int64(q.seg) * vodstore.SegmentMS
	cs, err := s.vod.db.Comments(ctx, st, from, from+vodstore.SegmentMS)
	if err != nil {
		return vodAnswer{}, err
	}
	kept, omitted := vodstore.Sample(cs, s.cfg.VODSegmentCap)
	s.vod.m.omitted.Add(float64(omitted))
	return vodAnswer{final: !st.Live(), v: danmaku.VODSegmentResponse{RoomID: q.room, StreamID: q.stream, Seg: q.seg,
		From: from, To: from + vodstore.SegmentMS, Final: !st.Live(), Omitted: omitted, Comments: kept}}, nil
}

func (s *Server) vodDensity(ctx context.Context, q vodQuery) (vodAnswer, error) {
	st, err := s.vod.db.Stream(ctx, q.room, q.stream)
	if err != nil {
		return vodAnswer{}, err
	}
	b := q.bucket.Milliseconds()
	counts, err := s.vod.db.Density(ctx, st, b)
	if err != nil {
		return vodAnswer{}, err
	}
	if len(counts) > vodMaxBuckets {
		return vodAnswer{}, danmaku.Errorf(danmaku.EINVALID, "bucket", "%v makes %d buckets for this stream, more than %d: ask for larger ones", q.bucket, len(counts), vodMaxBuckets)
	}
	return vodAnswer{final: !st.Live(), v: danmaku.VODDensityResponse{RoomID: q.room, StreamID: q.stream, BucketMS: b,
		Final: !st.Live(), Counts: counts}}, nil
}

// adminStreamStart starts a stream of the room, with the id asked for or
// a new one. A start while another stream is live ends that one.
func (s *Server) adminStreamStart(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	id := req.StreamID
	if id == "" {
		id = s.ids.Next()
	} else if err := danmaku.CheckID("streamId", id); err != nil {
		return AdminResponse{}, err
	}
	return s.streamEvent(r, danmaku.OpStreamStart, req.RoomID, id)
}

// adminStreamEnd ends the room's live stream (the one named, if any).
func (s *Server) adminStreamEnd(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	if req.StreamID != "" {
		if err := danmaku.CheckID("streamId", req.StreamID); err != nil {
			return AdminResponse{}, err
		}
	}
	return s.streamEvent(r, danmaku.OpStreamEnd, req.RoomID, req.StreamID)
}

func (s *Server) streamEvent(r *http.Request, op, room, stream string) (AdminResponse, error) {
	ev := danmaku.Event{Op: op, Room: room, ID: s.ids.Next(), Stream: stream, At: time.Now().UnixMilli()}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		return AdminResponse{}, danmaku.Unavailable("kafka unavailable, the stream did not change; retry", err)
	}
	return AdminResponse{RoomID: room, StreamID: stream, At: ev.At, EventID: ev.ID}, nil
}
