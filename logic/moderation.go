package logic

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
)

// Moderation that reaches the viewers: a ban and a deletion are events on
// the room's partition, delivered by job to every comet of the room after
// the room's messages before them (see danmaku.Event).
//
// A ban is written to Redis first, so the user's sends (403 banned) and
// joins (close 4003) are refused from the answer on; its event then makes
// the comets close the user's open connections to the room. A deletion
// has no Redis write here: job rewrites the room's history when it
// delivers the event, after the deleted messages went out, so a message
// still on its way is deleted too.

// adminBan bans a user from a room for a duration.
func (s *Server) adminBan(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := requireUserRoom(req); err != nil {
		return AdminResponse{}, err
	}
	d, err := parseSanction(req.Duration)
	if err != nil {
		return AdminResponse{}, err
	}
	user := strconv.FormatInt(req.UserID, 10)
	until := time.Now().Add(d)
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	if err := s.store.Ban(ctx, user, req.RoomID, d); err != nil {
		return AdminResponse{}, s.redisError("ban", err)
	}
	ev := danmaku.Event{Op: danmaku.OpBan, Room: req.RoomID, ID: s.ids.next(), User: user, Until: until.UnixMilli()}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		return AdminResponse{}, danmaku.Unavailable("the ban holds for new joins and sends, but open connections were not closed; ban again", err)
	}
	return AdminResponse{UserID: req.UserID, RoomID: req.RoomID, Until: until.UnixMilli(), EventID: ev.ID}, nil
}

// adminUnban lifts a ban; the user may join and send again.
func (s *Server) adminUnban(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := requireUserRoom(req); err != nil {
		return AdminResponse{}, err
	}
	return s.lift(r, req, "unban", s.store.Unban)
}

// adminDelete deletes messages of a room: it answers once Kafka has the
// del event; viewers see the messages go within a delivery window.
func (s *Server) adminDelete(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	if len(req.IDs) == 0 || len(req.IDs) > danmaku.MaxDelIDs {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "ids", "want 1 to %d message ids", danmaku.MaxDelIDs)
	}
	for i, id := range req.IDs {
		if err := danmaku.CheckID("ids["+strconv.Itoa(i)+"]", id); err != nil {
			return AdminResponse{}, err
		}
	}
	ev := danmaku.Event{Op: danmaku.OpDel, Room: req.RoomID, ID: s.ids.next(), IDs: req.IDs}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		return AdminResponse{}, danmaku.Unavailable("kafka unavailable, nothing deleted; retry", err)
	}
	return AdminResponse{RoomID: req.RoomID, IDs: req.IDs, EventID: ev.ID}, nil
}

func requireUserRoom(req *AdminRequest) error {
	if err := requireUser(req); err != nil {
		return err
	}
	if req.RoomID == "" {
		return danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	return nil
}

// produceEvent writes ev to the room's partition and returns once Kafka
// acknowledged it.
func (s *Server) produceEvent(ctx context.Context, ev danmaku.Event) error {
	value, err := danmaku.MarshalEvent(ev)
	if err != nil {
		return err
	}
	err = s.write(ctx, []byte(ev.Room), time.Now(), value)
	if err != nil {
		s.log.Warn("kafka produce of an event failed", zap.String("room", ev.Room), zap.String("op", ev.Op), zap.Error(err))
	}
	return err
}
