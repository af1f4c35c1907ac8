package logic

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// Hold for review (RoomState.Review). In a room with review on, a comment
// of a non-moderator that matches a blocked word is not refused (nor
// masked): the send path puts it in the room's review queue in Redis
// (route.AddReview) and answers 202 as for any send, its id in held. It
// is not on Kafka, so nothing downstream (job, comets, the archive) sees
// it. A moderator lists the queue, approves (the comment is written to
// Kafka then as an ordinary comment with its original id and ts, and gets
// its position, after the room's messages accepted before the approval)
// or rejects (it is removed, never shown). Items expire after
// logic.review_ttl unreviewed.
//
//	GET  /logic/admin/review?roomId=R[&limit=N]       {"roomId","items":[{"id","uid","name","content","ts","word"}]}
//	POST /logic/admin/review/approve {"roomId","ids"}  {"action":"approve","roomId","approved":N}
//	POST /logic/admin/review/reject  {"roomId","ids"}  {"action":"reject","roomId","rejected":N}
//
// N counts the ids that were in the queue: an approval claims its ids
// first (route.ClaimReview), so of two approvals of one id at the same
// time one writes it, once, and the other answers 0 for it. A send
// retried without its msgId (same sender, same content) while its comment
// waits in the queue is answered with that comment's id and queued once.

// maxReviewRead is the most items one GET /logic/admin/review answers.
const maxReviewRead = 500

func newReviewCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "danmaku", Subsystem: "logic", Name: "review_total",
		Help: "Comments held for review (held: a blocked word in a room with review on), and the ones moderators approved and rejected.",
	}, []string{"result"})
	reg.MustRegister(c)
	for _, r := range []string{"held", "approved", "rejected"} {
		c.WithLabelValues(r)
	}
	return c
}

func (m *metrics) observeReview(result string, n int) {
	if n > 0 {
		m.review.WithLabelValues(result).Add(float64(n))
	}
}

// serveReview is GET /logic/admin/review?roomId=R[&limit=N]: the oldest N
// (100, at most 500) comments of the room's review queue.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request) {
	room, limit, ok := s.adminRead(w, r, readQuery{Name: "review", Action: "approve", Room: true, Limit: 100, Max: maxReviewRead})
	if !ok {
		return
	}
	ctx, cancel := s.redisCtx(r)
	items, err := s.store.ReviewQueue(ctx, room, s.cfg.ReviewTTL, limit)
	cancel()
	if err != nil {
		httpx.WriteError(w, s.redisError("review queue", err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, danmaku.ReviewResponse{RoomID: room, Items: items})
}

// checkReviewIDs checks the room and ids of an approve or reject.
func checkReviewIDs(req *AdminRequest) error {
	if req.RoomID == "" {
		return danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	if len(req.IDs) == 0 || len(req.IDs) > danmaku.MaxDelIDs {
		return danmaku.Errorf(danmaku.EINVALID, "ids", "want 1 to %d message ids", danmaku.MaxDelIDs)
	}
	for i, id := range req.IDs {
		if err := danmaku.CheckID("ids["+strconv.Itoa(i)+"]", id); err != nil {
			return err
		}
	}
	return nil
}

// reviewClaim is how long an approval holds the items it writes: longer
// than the write may take (logic.produce_timeout), so only an approver
// that died loses its claim; its items are back in the queue then.
const reviewClaim = time.Minute

// adminApprove claims the queued comments of ids (a concurrent approval
// of the same ids finds them claimed and approves none of them), writes
// them to Kafka as ordinary comments, then takes them out of the queue. A
// Kafka write that fails puts them back (503).
func (s *Server) adminApprove(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := checkReviewIDs(req); err != nil {
		return AdminResponse{}, err
	}
	ctx, cancel := s.redisCtx(r)
	items, err := s.store.ClaimReview(ctx, req.RoomID, req.IDs, s.cfg.ReviewTTL, max(reviewClaim, 2*s.cfg.ProduceTimeout))
	cancel()
	if err != nil {
		return AdminResponse{}, s.redisError("claim review", err)
	}
	var ids []string
	values := make([][]byte, 0, len(items))
	for _, it := range items {
		v, err := danmaku.MarshalEnvelope(req.RoomID, danmaku.Message{ID: it.ID, UID: it.UID, Name: it.Name, Content: it.Content, TS: it.TS})
		if err != nil {
			return AdminResponse{}, err
		}
		values, ids = append(values, v), append(ids, it.ID)
	}
	n := len(ids)
	if n > 0 {
		if err := s.write(r.Context(), []byte(req.RoomID), time.Now(), values...); err != nil {
			ctx, cancel := s.redisCtx(r)
			if rerr := s.store.ReleaseReview(ctx, req.RoomID, ids, s.cfg.ReviewTTL); rerr != nil {
				s.log.Warn("release review claims; they end by themselves", zap.String("room", req.RoomID), zap.Error(rerr))
			}
			cancel()
			return AdminResponse{}, danmaku.Unavailable("kafka unavailable, nothing approved; retry", err)
		}
		if _, err := s.removeReview(r, req.RoomID, ids); err != nil {
			// Written: the claim ends and brings them back, and a second
			// approval writes them again, which job delivers once.
			return AdminResponse{}, err
		}
	}
	s.m.observeReview("approved", n)
	return AdminResponse{RoomID: req.RoomID, IDs: ids, Approved: &n}, nil
}

// adminReject takes the comments of ids out of the room's queue: they are
// never shown.
func (s *Server) adminReject(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := checkReviewIDs(req); err != nil {
		return AdminResponse{}, err
	}
	n, err := s.removeReview(r, req.RoomID, req.IDs)
	if err != nil {
		return AdminResponse{}, err
	}
	s.m.observeReview("rejected", n)
	return AdminResponse{RoomID: req.RoomID, Rejected: &n}, nil
}

func (s *Server) removeReview(r *http.Request, room string, ids []string) (int, error) {
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	n, err := s.store.RemoveReview(ctx, room, ids, s.cfg.ReviewTTL)
	if err != nil {
		return 0, s.redisError("remove review", err)
	}
	return n, nil
}
