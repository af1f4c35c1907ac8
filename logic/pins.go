package logic

import (
	"net/http"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/sendpath"
)

// Pins. POST /logic/admin/pin pins a message of the room (ids: its id)
// or a moderator's text (content) for a duration; a paid message (amount)
// without a duration is pinned longer the more it paid (pinFor). The pin
// replaces the room's pin, is stored with the room's settings and goes
// through Kafka and job to the room's comets as a pin event, which
// viewers get as the pin frame (and in the welcome while it lasts).
// POST /logic/admin/unpin takes it away early (the unpin frame); at its
// end viewers drop it on their own.

// MaxPin is the longest a pin lasts.
const MaxPin = 24 * time.Hour

// pinFor is how long a paid message of amount is pinned: a second per 10
// units of amount, from 30 s to 5 h.
func pinFor(amount int64) time.Duration {
	return min(max(time.Duration(amount/10)*time.Second, 30*time.Second), 5*time.Hour)
}

// adminPin pins a message or a text to a room.
func (s *Server) adminPin(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	d, err := pinDuration(req)
	if err != nil {
		return AdminResponse{}, err
	}
	p, err := s.pinOf(r, req)
	if err != nil {
		return AdminResponse{}, err
	}
	p.Amount = req.Amount
	p.Until = time.Now().Add(d).UnixMilli()
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	if p, err = s.store.SetPin(ctx, req.RoomID, p); err != nil {
		return AdminResponse{}, s.redisError("pin", err)
	}
	ev := danmaku.Event{Op: danmaku.OpPin, Room: req.RoomID, ID: s.ids.Next(), Pin: &p}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		return AdminResponse{}, danmaku.Unavailable("the pin is saved for new viewers, but the room's viewers were not told; pin again", err)
	}
	return AdminResponse{RoomID: req.RoomID, Until: p.Until, Pin: &p, EventID: ev.ID}, nil
}

// pinDuration is a pin's duration: the request's (1s to MaxPin), or
// pinFor its amount.
func pinDuration(req *AdminRequest) (time.Duration, error) {
	if req.Amount < 0 {
		return 0, danmaku.Errorf(danmaku.EINVALID, "amount", "must not be negative")
	}
	if req.Duration == "" && req.Amount > 0 {
		return pinFor(req.Amount), nil
	}
	d, err := time.ParseDuration(req.Duration)
	if err != nil || d < time.Second || d > MaxPin {
		return 0, danmaku.Errorf(danmaku.EINVALID, "duration", "want a duration between 1s and %v, like \"2m\" (or an amount)", MaxPin)
	}
	return d, nil
}

// pinOf is what the request pins: the message of its one id, looked up in
// the room's history, or its content, a text of the moderators.
func (s *Server) pinOf(r *http.Request, req *AdminRequest) (danmaku.Pin, error) {
	switch {
	case len(req.IDs) == 0 && req.Content != "":
		if err := sendpath.CheckText("content", req.Content, s.cfg.MaxContentRunes, false); err != nil {
			return danmaku.Pin{}, err
		}
		return danmaku.Pin{ID: s.ids.Next(), Content: req.Content}, nil
	case len(req.IDs) != 1 || req.Content != "":
		return danmaku.Pin{}, danmaku.Errorf(danmaku.EINVALID, "ids", "pin one message (ids: [its id]) or a text (content), not both")
	}
	id := req.IDs[0]
	if err := danmaku.CheckID("ids[0]", id); err != nil {
		return danmaku.Pin{}, err
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	h, err := s.store.History(ctx, req.RoomID, -1, delScan)
	if err != nil {
		return danmaku.Pin{}, s.redisError("history", err)
	}
	for _, m := range h.Msgs {
		if m.ID == id && !m.Deleted {
			return danmaku.Pin{ID: id, UID: m.UID, Name: m.Name, Content: m.Content}, nil
		}
	}
	return danmaku.Pin{}, danmaku.Errorf(danmaku.ENOTFOUND, "ids[0]", "no message %s in the history of room %s", id, req.RoomID)
}

// adminUnpin takes the room's pin of the given id (ids: [pin id]) away.
func (s *Server) adminUnpin(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	if len(req.IDs) != 1 {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "ids", "name the pin: [its id]")
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	v, err := s.store.Unpin(ctx, req.RoomID, req.IDs[0])
	if err != nil {
		return AdminResponse{}, s.redisError("unpin", err)
	}
	removed := v > 0
	if !removed {
		return AdminResponse{RoomID: req.RoomID, Removed: &removed}, nil
	}
	p := danmaku.Pin{ID: req.IDs[0], Ver: v}
	ev := danmaku.Event{Op: danmaku.OpUnpin, Room: req.RoomID, ID: s.ids.Next(), Pin: &p}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		return AdminResponse{}, danmaku.Unavailable("the pin is gone for new viewers, but the room's viewers were not told; unpin again", err)
	}
	return AdminResponse{RoomID: req.RoomID, Removed: &removed, EventID: ev.ID}, nil
}
