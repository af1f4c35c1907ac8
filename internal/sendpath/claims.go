package sendpath

import (
	"fmt"
	"strconv"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/wordfilter"
)

// applyClaims makes the token, not the request, say who sends: the user id
// and name are the token's (a token without a name shows the user id), a
// userId that names somebody else is refused, and so is a room the token
// does not allow. Message ids are namespaced by the token's user in
// Validate, so another user's idempotency keys cannot be reached.
func (p *Path) applyClaims(req *danmaku.SendRequest, c *auth.Claims) error {
	if req.UserID != 0 && req.UserID != c.UID {
		p.m.Refused("forbidden")
		return danmaku.Errorf(danmaku.CodeForbidden, "userId", "does not match the token's user")
	}
	if req.RoomID != "" && !c.AllowsRoom(req.RoomID) {
		p.m.Refused("forbidden")
		return danmaku.Errorf(danmaku.CodeForbidden, "roomId", "the token does not allow this room")
	}
	req.UserID = c.UID
	req.UserName = c.Name
	if req.UserName == "" {
		req.UserName = strconv.FormatInt(c.UID, 10)
	}
	return nil
}

// The high lane. A send asks for it with "priority":1. Who may:
//
//   - a send with a token granting the moderator or the priority role
//     (logic.auth: jwt);
//   - POST /logic/admin/send, the send of the admin API (logic.admin_secret):
//     the backend posting system or paid messages under any user id.
//
// Anybody else is refused with 403 priority_denied. Every high-priority
// message, whoever sends it, takes a token of its room's high-priority
// bucket (logic.high_rate_limit, logic.high_rate_burst; 429 with
// Retry-After beyond it).

// allowPriority refuses high priority to a sender without the right:
// claims is the sender's verified token (nil with auth off).
func (p *Path) allowPriority(req *danmaku.SendRequest, c *auth.Claims) error {
	if !req.Priority.High() || c != nil && (c.HasRole(auth.RoleModerator) || c.HasRole(auth.RolePriority)) {
		return nil
	}
	p.m.Refused("priority")
	if c == nil {
		return danmaku.Errorf(danmaku.CodePriorityDenied, "priority",
			"high priority needs a token with the moderator or priority role (logic.auth: jwt) or POST /logic/admin/send")
	}
	return danmaku.Errorf(danmaku.CodePriorityDenied, "priority", "the token grants neither the moderator nor the priority role")
}

// filterWords applies the blocked-word list to the user name and every
// comment: reject refuses the request naming the first field with a match
// (400 content_blocked), mask replaces the words in place. The comments
// held for review (review[i] set) are left as they were written.
func (p *Path) filterWords(req *danmaku.SendRequest, review []string) error {
	if p.filter().Mode() == wordfilter.ModeOff {
		return nil
	}
	name, err := p.filter().Apply("userName", req.UserName)
	if err != nil {
		p.m.Refused("blocked")
		return err
	}
	req.UserName = name
	for i := range req.Messages {
		if i < len(review) && review[i] != "" {
			continue // held for review as it was written
		}
		m := &req.Messages[i]
		content, err := p.filter().Apply(fmt.Sprintf("messages[%d].content", i), m.Content)
		if err != nil {
			p.m.Refused("blocked")
			return err
		}
		m.Content = content
	}
	return nil
}

// reviewWords returns the blocked word each message of req matches ("" for
// none), nil when none does: in a room with review on, those go to its
// review queue instead of being refused or masked.
func (p *Path) reviewWords(req *danmaku.SendRequest) []string {
	if p.filter().Mode() == wordfilter.ModeOff {
		return nil
	}
	var out []string
	for i, m := range req.Messages {
		if w, ok := p.filter().Match(m.Content); ok {
			if out == nil {
				out = make([]string, len(req.Messages))
			}
			out[i] = w
		}
	}
	return out
}
