package route

import (
	"net/netip"

	"github.com/danmaku/danmaku"
)

// Key builders. Every key of the service is built here. The part in braces is
// a Redis Cluster hash tag: all keys of one room share a slot, so the per-room
// Lua scripts run on a cluster as on a single server.
//
// Callers validate ids first (checkIDs); the builders only concatenate.

func roomConnectionsKey(room string) string { return "room:connections:{" + room + "}" }
func roomCometsKey(room string) string      { return "room:comets:{" + room + "}" }
func connectionInfoKey(conn string) string  { return "connection:info:{" + conn + "}" }
func userOnlineKey(user string) string      { return "user:online:{" + user + "}" }
func cometKey(comet string) string          { return "comet:{" + comet + "}" }
func cometConnectionsKey(comet string) string {
	return "comet:connections:{" + comet + "}"
}
func processedKey(room, msgID string) string { return "msg:processed:{" + room + "}:" + msgID }
func cooldownKey(room string) string         { return "room:cooldown:{" + room + "}" }
func lockKey(room string) string             { return "lock:broadcast:{" + room + "}" }
func rateKey(user string) string             { return "ratelimit:user:{" + user + "}" }
func highRateKey(room string) string         { return "ratelimit:high:{" + room + "}" }
func timelineKey(room string) string         { return "room:timeline:{" + room + "}" }
func historyKey(room string) string          { return "room:history:{" + room + "}" }
func delsKey(room string) string             { return "room:dels:{" + room + "}" }
func roomStateKey(room string) string        { return "room:state:{" + room + "}" }

// slowKey is the slow-mode mark of user's last message in room, uniqueKey
// the unique-chat mark of a content (its digest) sent to room: both carry
// the room's hash tag, so one script checks a send's marks together.
func slowKey(room, user string) string     { return "room:slow:{" + room + "}:" + user }
func uniqueKey(room, digest string) string { return "room:unique:{" + room + "}:" + digest }

// noticeProcessedKey is the dedup key of a notice to user, or of a
// broadcast notice when user is empty. A user's keys carry the user's hash
// tag, the slot of user:online:{user}, so one script claims a user's
// notices and reads the user's connections; broadcasts share one tag.
// Room ids hold no ':', so no room's key looks like these.
func noticeProcessedKey(user, id string) string {
	if user == "" {
		return "msg:processed:all:{all}:" + id
	}
	return "msg:processed:user:{" + user + "}:" + id
}

// ipRateKey returns the bucket key of a client address: the address itself
// for IPv4, its /64 for IPv6 (an IPv4-mapped address counts as IPv4).
func ipRateKey(ip string) (string, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", danmaku.Errorf(danmaku.EINVALID, "ip", "not an IP address")
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return "ratelimit:ip:{" + p.String() + "}", nil
	}
	return "ratelimit:ip:{" + addr.String() + "}", nil
}

// muteKey is the mute flag of user in room, or everywhere for room "".
// Both carry the user's hash tag, the same as the user's bucket, so the
// send check reads them in the bucket's script.
func muteKey(user, room string) string {
	if room == "" {
		return "mute:user:{" + user + "}"
	}
	return "mute:user:{" + user + "}:room:" + room
}

// banKey is the ban of user from room. It carries the room's hash tag: the
// registry's join script reads it with the room's keys.
func banKey(room, user string) string { return "room:ban:{" + room + "}:" + user }

// auditKey is the audit log of admin actions, one list for the service.
const auditKey = "admin:audit"

// globalWordsKey is the edited global blocked-word list (words.go).
const globalWordsKey = "admin:words"

// reviewKey holds a room's comments waiting for review, reviewOrderKey
// their order and age (review.go).
func reviewKey(room string) string      { return "room:review:{" + room + "}" }
func reviewOrderKey(room string) string { return "room:reviewq:{" + room + "}" }

// heldKey lists the comments a room's delay holds in job by release time,
// heldMsgKey holds them (held.go).
func heldKey(room string) string    { return "room:held:{" + room + "}" }
func heldMsgKey(room string) string { return "room:heldm:{" + room + "}" }

// reviewClaimKey holds the items approvals are writing, reviewRetryKey
// the items by sender and content (review.go).
func reviewClaimKey(room string) string { return "room:reviewc:{" + room + "}" }
func reviewRetryKey(room string) string { return "room:reviewk:{" + room + "}" }

// roomSanctionsKey lists the active mutes and bans of a room, sanctionsKey
// those of the whole service (lists.go).
func roomSanctionsKey(room string) string { return "room:sanctions:{" + room + "}" }

const sanctionsKey = "admin:sanctions"

// sendRulesKey holds logic's rules of the send path (sendrules.go), which
// the comets that take sends over their sockets apply.
const sendRulesKey = "send:rules"

// cometsIndexKey is the set of comet ids that ever took a lease and have not
// been removed; liveness itself is the existence of comet:{cometId}.
const cometsIndexKey = "comets:index"

// checkIDs validates pairs of (field, id) and returns the first error.
func checkIDs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := danmaku.CheckID(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}
