package logic

import (
	"net/http"
	"time"

	"github.com/danmaku/danmaku"
)

// Streams and their replay (VOD). A stream is a live session of a room:
// the admin API starts and ends it with an event on the room's partition,
// so the archive role, which consumes the partition in order, puts each
// comment in the stream it was sent during. The comments' offsets are
// their accepted time minus the stream's start.

// adminStreamStart starts a stream of the room, with the id asked for or
// a new one. A start while another stream is live ends that one.
func (s *Server) adminStreamStart(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	id := req.StreamID
	if id == "" {
		id = s.ids.next()
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
	ev := danmaku.Event{Op: op, Room: room, ID: s.ids.next(), Stream: stream, At: time.Now().UnixMilli()}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		return AdminResponse{}, danmaku.Unavailable("kafka unavailable, the stream did not change; retry", err)
	}
	return AdminResponse{RoomID: room, StreamID: stream, At: ev.At, EventID: ev.ID}, nil
}
