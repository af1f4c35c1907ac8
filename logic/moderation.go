package logic

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/sendpath"
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
	ev := danmaku.Event{Op: danmaku.OpBan, Room: req.RoomID, ID: s.ids.Next(), User: user, Until: until.UnixMilli()}
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
// del event; viewers see the messages go within a delivery window. Only
// the ids that are messages of the room go into the event (messagesOf);
// the answer counts them and lists the others, and when there are none it
// is 404 with no event.
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
	found, missing, err := s.messagesOf(r, req.RoomID, req.IDs)
	if err != nil {
		return AdminResponse{}, err
	}
	if len(found) == 0 {
		return AdminResponse{}, danmaku.Errorf(danmaku.ENOTFOUND, "ids",
			"none of the ids is a message of room %s (in its history, not deleted, or accepted in the last %v)", req.RoomID, delInFlight)
	}
	// Marked before the event is written: a message still held in job (the
	// room's delay) or on its way then never gets a position, whatever
	// job's crashes and redeliveries do (route.MarkDeleted).
	ctx, cancel := s.redisCtx(r)
	err = s.store.MarkDeleted(ctx, req.RoomID, found, deletedMarkTTL)
	cancel()
	if err != nil {
		return AdminResponse{}, s.redisError("mark deleted", err)
	}
	ev := danmaku.Event{Op: danmaku.OpDel, Room: req.RoomID, ID: s.ids.Next(), IDs: found}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		return AdminResponse{}, danmaku.Unavailable("kafka unavailable, nothing deleted; retry", err)
	}
	return AdminResponse{RoomID: req.RoomID, IDs: found, Found: len(found), Missing: missing, EventID: ev.ID}, nil
}

// deletedMarkTTL is how long a deleted id stays marked (route.MarkDeleted):
// far beyond any hold and any redelivery of its message.
const deletedMarkTTL = 24 * time.Hour

// A delete looks for its ids among the newest delScan messages of the
// room's history; a generated id stamped within delInFlight counts as
// found too, since its message may still be on its way to the history.
const (
	delScan     = 20000
	delInFlight = time.Minute
)

// messagesOf splits ids into the messages of room a delete can reach
// (found) and the others: never sent to the room, already deleted, or older
// than the history holds.
func (s *Server) messagesOf(r *http.Request, room string, ids []string) (found, missing []string, err error) {
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	h, err := s.store.History(ctx, room, -1, delScan)
	if err != nil {
		return nil, nil, s.redisError("history", err)
	}
	// seen: 0 not in the history, 1 a message, 2 a deleted one.
	seen := make(map[string]int8, len(ids))
	for _, id := range ids {
		seen[id] = 0
	}
	for _, m := range h.Msgs {
		if _, asked := seen[m.ID]; asked {
			seen[m.ID] = 1
			if m.Deleted {
				seen[m.ID] = 2
			}
		}
	}
	// In a room with a delay, a message of any id may be held in job.
	held := false
	if st, err := s.send.RoomState(ctx, room); err == nil {
		held = st.State.DelaySeconds > 0
	}
	for _, id := range ids {
		t, generated := sendpath.IDTime(id)
		if seen[id] == 1 || seen[id] == 0 && (held || generated && time.Since(t) < delInFlight) {
			found = append(found, id)
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing, nil
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
