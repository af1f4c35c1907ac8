package client

import (
	"time"

	"github.com/danmaku/danmaku"
)

// roomInfo is what the viewer was told of a room's settings and pin.
type roomInfo struct {
	state  *danmaku.RoomState
	pin    *danmaku.Pin // nil: none
	pinVer int64        // the version of the newest pin or unpin seen
}

// RoomState returns room's settings as last told (the newest version);
// ok is false while the viewer was told none (every mode off).
func (v *Viewer) RoomState(room string) (st danmaku.RoomState, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ri := v.info[room]; ri != nil && ri.state != nil {
		return *ri.state, true
	}
	return danmaku.RoomState{}, false
}

// Pinned returns room's pin in force, or nil when none is (never pinned,
// taken away, or past its Until).
func (v *Viewer) Pinned(room string) *danmaku.Pin {
	v.mu.Lock()
	defer v.mu.Unlock()
	ri := v.info[room]
	if ri == nil || ri.pin == nil || ri.pin.Until <= time.Now().UnixMilli() {
		return nil
	}
	p := *ri.pin
	return &p
}

// roomLocked returns room's info, made on first use.
func (v *Viewer) roomLocked(room string) *roomInfo {
	ri := v.info[room]
	if ri == nil {
		ri = &roomInfo{}
		v.info[room] = ri
	}
	return ri
}

// newState keeps st as room's settings when newer than those held and
// returns the event to report, or nil.
func (v *Viewer) newState(room string, st *danmaku.RoomState) *Event {
	if st == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	ri := v.roomLocked(room)
	if ri.state != nil && ri.state.Ver >= st.Ver {
		return nil
	}
	c := *st
	ri.state = &c
	out := c
	return &Event{Kind: StateChanged, Room: room, State: &out}
}

// newPin applies a pin (op pin), an unpin (op unpin: pin names the pin
// taken away) or a welcome's pin (op welcome: pin nil when none is in
// force, which ends a held one whatever its version) and returns the
// event to report when the pin in force changed, or nil.
func (v *Viewer) newPin(op, room string, pin *danmaku.Pin) *Event {
	v.mu.Lock()
	defer v.mu.Unlock()
	ri := v.roomLocked(room)
	var next *danmaku.Pin
	switch op {
	case danmaku.OpPin:
		if pin == nil || pin.Ver <= ri.pinVer {
			return nil
		}
		ri.pinVer, next = pin.Ver, pin
	case danmaku.OpUnpin:
		if pin == nil || pin.Ver <= ri.pinVer || ri.pin == nil || ri.pin.ID != pin.ID {
			return nil
		}
		ri.pinVer = pin.Ver
	default:
		if pin != nil {
			ri.pinVer = max(ri.pinVer, pin.Ver)
		}
		next = pin
	}
	if next != nil && next.Until <= time.Now().UnixMilli() {
		next = nil
	}
	held := ri.pin
	if next != nil {
		c := *next
		next = &c
	}
	ri.pin = next
	if (next == nil && held == nil) || (next != nil && held != nil && next.ID == held.ID && next.Ver == held.Ver) {
		return nil
	}
	ev := &Event{Kind: PinChanged, Room: room}
	if next != nil {
		c := *next
		ev.Pin = &c
	}
	return ev
}
