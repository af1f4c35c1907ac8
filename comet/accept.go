package comet

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/wsframe"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/httpx"
)

// serveWS checks a viewer's request, upgrades it and starts its reader.
// Every refusal happens before the upgrade, with a JSON error.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	uid, claims, err := s.admit(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	dens, err := densityParam(r.URL.Query().Get("density"))
	if err != nil {
		s.metrics.rejected("bad_density")
		httpx.WriteError(w, err)
		return
	}
	rooms := roomsOfURL(r, s.cfg.MaxRoomsPerConn)
	ip := remoteIP(r)
	key, ok := s.limiter.acquire(ip)
	if !ok {
		s.metrics.rejected("ip_limit")
		httpx.WriteError(w, danmaku.Errorf(danmaku.ERATELIMIT, "", "too many connections from %s", s.limiter.key(ip)))
		return
	}
	c := s.upgrade(w, r, uid, key)
	if c == nil {
		s.limiter.release(key)
		return
	}
	c.claims = claims
	if dens == noCap && claims != nil && claims.Density != nil {
		dens = *claims.Density
	}
	c.density = dens
	s.metrics.accept()
	s.hub.addConn(c)
	go c.readLoop(rooms)
}

// urlRooms are the rooms of a /ws URL: the joins to make, in order, the
// invalid room ids (each answered by an error frame), and the rooms beyond
// the connection's limit: the first of them and how many (answered
// together by one error frame).
type urlRooms struct {
	reqs  []joinReq
	bad   []error
	over  string
	nOver int
}

// roomsOfURL reads the rooms of the URL: every room parameter, in order,
// once, up to limit; the rest are counted, not looked at. A room resumes
// after since.ROOM of epoch.ROOM when those are given; the plain since and
// epoch belong to the first room, so the one-room form ?room=R&since=P&
// epoch=E keeps its meaning. A since that is not a non-negative integer
// makes a fresh join.
func roomsOfURL(r *http.Request, limit int) urlRooms {
	q := r.URL.Query()
	var u urlRooms
	seen := map[string]bool{}
	for i, room := range q["room"] {
		if room == "" || seen[room] {
			continue
		}
		seen[room] = true
		if len(u.reqs)+len(u.bad) >= limit {
			if u.nOver == 0 {
				u.over = room
			}
			u.nOver++
			continue
		}
		if err := danmaku.CheckID("room", room); err != nil {
			u.bad = append(u.bad, err)
			continue
		}
		since, epoch := q.Get("since."+room), q.Get("epoch."+room)
		if i == 0 && !q.Has("since."+room) {
			since, epoch = q.Get("since"), q.Get("epoch")
		}
		req := joinReq{room: room, epoch: epoch}
		if p, err := strconv.ParseInt(since, 10, 64); err == nil && p >= 0 {
			req.resume, req.since = true, p
		}
		if len(req.epoch) > maxEpochLen {
			req.epoch = ""
		}
		u.reqs = append(u.reqs, req)
	}
	return u
}

// admit checks that a viewer may connect: the comet is not shutting down,
// the origin is allowed and the viewer authenticates (see viewer). It
// returns the uid and claims, or the error to answer with (counted).
func (s *Server) admit(r *http.Request) (uid string, claims *auth.Claims, err error) {
	if s.isClosing() {
		s.metrics.rejected("shutting_down")
		return "", nil, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "comet is shutting down")
	}
	if !s.originAllowed(r) {
		s.metrics.rejected("origin")
		return "", nil, danmaku.Errorf(danmaku.CodeForbidden, "origin", "origin %q not allowed", r.Header.Get("Origin"))
	}
	return s.viewer(r)
}

// upgrade completes the WebSocket handshake and returns the new viewer,
// counted among the readers Shutdown waits for. It returns nil when the
// handshake failed or the comet started shutting down meanwhile (that
// viewer is closed with 1001).
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, uid, ipKey string) *conn {
	hj := &wsframe.Hijacker{ResponseWriter: w}
	ws, err := s.upgrader.Upgrade(hj, r, nil)
	if err != nil {
		s.metrics.rejected("handshake")
		return nil
	}
	c := &conn{s: s, ws: ws, fc: hj.Frames, user: uid, ip: remoteIP(r), ipKey: ipKey, seq: s.seq.Add(1), density: noCap,
		deflate: s.cfg.Compression && offersDeflate(r.Header)}
	s.boundSendBuffer(ws.NetConn())
	if c.fc != nil {
		c.fc.OnPing = func(payload []byte) { c.sendItem(item{Pong: payload}) }
		c.fc.OnPong = c.alive
		c.fc.OnText = c.onText
	}
	c.alive()
	c.id = s.connIDPfx + strconv.FormatUint(c.seq, 36)

	s.mu.RLock()
	if s.closing {
		s.mu.RUnlock()
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "shutting down"), time.Now().Add(closeGrace))
		ws.Close()
		return nil
	}
	s.readers.Add(1)
	s.mu.RUnlock()
	return c
}

// release removes every trace of a connection whose reader ended.
func (s *Server) release(c *conn) {
	c.w.MarkClosed()
	c.ws.Close()
	c.leaveAll()
	s.hub.removeConn(c)
	s.limiter.release(c.ipKey)
	s.readers.Done()
}

// boundSendBuffer caps the kernel send buffer of a viewer's socket at
// Config.SendBuffer (Linux reserves twice the value for bookkeeping): a
// viewer that stops reading fills it quickly, its writes then block and
// the write deadline (WriteWait) cuts it, instead of the kernel absorbing
// megabytes of frames while pings keep the connection alive.
func (s *Server) boundSendBuffer(nc net.Conn) {
	if s.cfg.SendBuffer <= 0 {
		return
	}
	if fc, ok := nc.(*wsframe.Conn); ok {
		nc = fc.Conn
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetWriteBuffer(s.cfg.SendBuffer)
	}
}
