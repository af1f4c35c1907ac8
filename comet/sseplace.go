package comet

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/danmaku/danmaku"
)

// Where an SSE stream stands. Every event that moves it (a welcome, a
// msgs frame of a room's timeline, an unsubscribed, the refusal that
// takes a room away) carries an SSE id naming every room the stream holds,
// in order (the first is the joined room), with the epoch and the last
// position written there: "ROOM:EPOCH:POS ROOM2:EPOCH2:POS2". A browser's
// EventSource sends the last one back as Last-Event-ID when it reconnects
// by itself; a stream opened with it joins those rooms and resumes each
// as since and epoch would.

// maxEventIDLen bounds a Last-Event-ID: every room of a connection with
// its longest epoch and position.
const maxEventIDLen = 8 * 1024

// spot is an epoch and a position in it.
type spot struct {
	epoch string
	pos   int64
}

// ssePlace is a stream's rooms and where it stands in each. The stream's
// goroutine moves it by the frames it forwards; POST /sse ops record the
// resumes and joins they ask for before the comet sees them.
type ssePlace struct {
	mu      sync.Mutex
	rooms   []string
	at      map[string]spot
	asked   map[string]spot // resumes asked and not yet welcomed
	joining string          // a posted join: its welcome leaves every other room
}

// newSSEPlace starts a stream's place from its URL's rooms and resumes.
func newSSEPlace(r *http.Request, limit int) *ssePlace {
	p := &ssePlace{at: map[string]spot{}, asked: map[string]spot{}}
	for _, req := range roomsOfURL(r, limit).reqs {
		if req.resume {
			p.asked[req.room] = spot{req.epoch, req.since}
		}
	}
	return p
}

// posted records a client frame posted to the stream.
func (p *ssePlace) posted(body []byte) {
	var f danmaku.ClientFrame
	if json.Unmarshal(body, &f) != nil || (f.Op != danmaku.OpJoin && f.Op != danmaku.OpSub) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.Since != nil && *f.Since >= 0 {
		p.asked[f.Room] = spot{f.Epoch, *f.Since}
	} else {
		delete(p.asked, f.Room)
	}
	if f.Op == danmaku.OpJoin {
		p.joining = f.Room
	}
}

// frame moves the place by a frame written to the stream and returns the
// event id to send with it, or "" when the frame does not move it.
func (p *ssePlace) frame(data []byte) (id string, moved bool) {
	if room, epoch, last, ok := msgsMark(data); ok {
		if epoch == "" {
			return "", false // a shadow frame: no position
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if !slices.Contains(p.rooms, room) {
			return "", false
		}
		if at := p.at[room]; at.epoch != epoch || last > at.pos {
			p.at[room] = spot{epoch, last}
		}
		return p.idLocked(), true
	}
	if !bytes.HasPrefix(data, []byte(`{"op":"welcome"`)) && !bytes.HasPrefix(data, []byte(`{"op":"unsubscribed"`)) &&
		!bytes.HasPrefix(data, []byte(`{"op":"error"`)) {
		return "", false
	}
	var f struct {
		danmaku.Welcome
		Code string `json:"code"`
	}
	if json.Unmarshal(data, &f) != nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch f.Op {
	case danmaku.OpWelcome:
		p.welcomedLocked(&f.Welcome)
	case danmaku.OpUnsubscribed:
		p.dropLocked(f.Room)
	default:
		switch f.Code {
		case danmaku.CodeBanned, danmaku.CodeFrameForbidden, danmaku.CodeTooManyRooms:
			p.dropLocked(f.Room)
		default:
			return "", false
		}
	}
	return p.idLocked(), true
}

// welcomedLocked holds the welcome's room: a recovered resume stands
// where it asked (its replay follows), a room held in the same epoch
// where it stood, anything else at the welcome's head (the history that
// follows ends there).
func (p *ssePlace) welcomedLocked(w *danmaku.Welcome) {
	asked, wasAsked := p.asked[w.Room]
	delete(p.asked, w.Room)
	if p.joining == w.Room {
		for _, r := range p.rooms {
			if r != w.Room {
				delete(p.at, r)
			}
		}
		p.rooms, p.joining = p.rooms[:0], ""
	}
	at, held := p.at[w.Room]
	if !slices.Contains(p.rooms, w.Room) {
		p.rooms = append(p.rooms, w.Room)
	}
	switch {
	case w.Recovered != nil && *w.Recovered && wasAsked:
		p.at[w.Room] = spot{w.Epoch, asked.pos}
	case held && at.epoch == w.Epoch:
	default:
		p.at[w.Room] = spot{w.Epoch, w.Pos}
	}
}

func (p *ssePlace) dropLocked(room string) {
	p.rooms = slices.DeleteFunc(p.rooms, func(r string) bool { return r == room })
	delete(p.at, room)
	delete(p.asked, room)
}

// idLocked is the event id of where the stream stands.
func (p *ssePlace) idLocked() string {
	var b strings.Builder
	for i, r := range p.rooms {
		if i > 0 {
			b.WriteByte(' ')
		}
		at := p.at[r]
		b.WriteString(r)
		b.WriteByte(':')
		b.WriteString(at.epoch)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(at.pos, 10))
	}
	return b.String()
}

// eventIDQuery returns q with its rooms, since and epoch replaced by those
// of the event id lastID; a malformed id is an error naming the header.
func eventIDQuery(q url.Values, lastID string) (url.Values, error) {
	bad := func(format string, a ...any) error {
		return danmaku.Errorf(danmaku.EINVALID, "Last-Event-ID", format, a...)
	}
	if len(lastID) > maxEventIDLen {
		return nil, bad("longer than %d bytes", maxEventIDLen)
	}
	out := url.Values{}
	for k, v := range q {
		if k != "room" && k != "since" && k != "epoch" && !strings.HasPrefix(k, "since.") && !strings.HasPrefix(k, "epoch.") {
			out[k] = v
		}
	}
	for _, part := range strings.Fields(lastID) {
		room, rest, ok1 := strings.Cut(part, ":")
		epoch, pos, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return nil, bad("%q is not ROOM:EPOCH:POS", part)
		}
		if err := danmaku.CheckID("room", room); err != nil {
			return nil, bad("room %q: %v", room, err)
		}
		if epoch != "" && (len(epoch) > maxEpochLen || danmaku.CheckID("epoch", epoch) != nil) {
			return nil, bad("epoch %q of room %s is not an epoch", epoch, room)
		}
		if n, err := strconv.ParseInt(pos, 10, 64); err != nil || n < 0 {
			return nil, bad("position %q of room %s is not a non-negative integer", pos, room)
		}
		out.Add("room", room)
		out.Set("since."+room, pos)
		out.Set("epoch."+room, epoch)
	}
	return out, nil
}

// msgsMark reads the room, the epoch and the last message's position of
// a msgs frame without decoding its messages: the comet writes them as
// {"op":"msgs","room":"R"[,"epoch":"E"]...,"msgs":[...,{...,"pos":N}]
// [,"skipped":N][,"dels":N]}. Another layout is decoded. ok is false for
// other frames.
func msgsMark(b []byte) (room, epoch string, last int64, ok bool) {
	const head = `{"op":"msgs","room":"`
	if !bytes.HasPrefix(b, []byte(head)) {
		return "", "", 0, false
	}
	rest := b[len(head):]
	i := bytes.IndexByte(rest, '"')
	if i < 0 {
		return "", "", 0, false
	}
	room, rest = string(rest[:i]), rest[i+1:]
	if e, found := bytes.CutPrefix(rest, []byte(`,"epoch":"`)); found {
		if j := bytes.IndexByte(e, '"'); j >= 0 {
			epoch = string(e[:j])
		}
	}
	if pos, found := lastPos(b); found && !strings.Contains(room, `\`) && !strings.Contains(epoch, `\`) {
		return room, epoch, pos, true
	}
	var f struct {
		Room  string `json:"room"`
		Epoch string `json:"epoch"`
		Msgs  []struct {
			Pos int64 `json:"pos"`
		} `json:"msgs"`
	}
	if json.Unmarshal(b, &f) != nil {
		return "", "", 0, false
	}
	for _, m := range f.Msgs {
		last = max(last, m.Pos)
	}
	return f.Room, f.Epoch, last, true
}

// lastPos reads the position of the last message from the end of a msgs
// frame laid out as msgsMark says.
func lastPos(b []byte) (int64, bool) {
	b, ok := bytes.CutSuffix(b, []byte("}"))
	if !ok {
		return 0, false
	}
	for _, field := range []string{`,"dels":`, `,"skipped":`} {
		j := len(b)
		for j > 0 && b[j-1] >= '0' && b[j-1] <= '9' {
			j--
		}
		if cut, found := bytes.CutSuffix(b[:j], []byte(field)); found && j < len(b) {
			b = cut
		}
	}
	b, ok = bytes.CutSuffix(b, []byte("}]"))
	if !ok {
		return 0, false
	}
	j := len(b)
	for j > 0 && b[j-1] >= '0' && b[j-1] <= '9' {
		j--
	}
	if j == len(b) || !bytes.HasSuffix(b[:j], []byte(`,"pos":`)) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b[j:]), 10, 64)
	return n, err == nil
}
