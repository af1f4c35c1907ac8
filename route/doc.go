// Package route is the Redis data model of the broadcast service and the
// only package that knows Redis keys and Lua scripts. It serves three
// callers: comet registers connections, keeps its lease and reads room
// histories, job guards deliveries, assigns timeline positions and looks up
// which comets hold a room, logic rate-limits users and reads online counts
// and histories.
//
// # Keys
//
// Every key of the service, built in keys.go and nowhere else. The part in
// braces is a Redis Cluster hash tag; <x> is a part outside it. TestKeySchema
// checks this table against the key builders.
//
//	key                             type and TTL                          written by  meaning
//	room:connections:{room}         set of connId                         comet       viewers of the room
//	room:comets:{room}              hash cometId -> count                 comet       broadcast index, O(comets); changes with the set above in one script
//	connection:info:{connId}        hash comet_id, user_id, room_id       comet       one room of one connection
//	user:online:{user}              hash connId -> cometId                comet       a user's tabs, one entry per room each holds
//	comet:{cometId}                 hash addr, started; TTL lease         comet       liveness and push address (comet.lease_ttl)
//	comet:connections:{cometId}     hash connId -> room:user              comet       a comet's connections, so a dead comet's routes can be removed
//	comets:index                    set of cometIds                       comet       comets that hold or held a lease; the janitor walks it
//	msg:processed:{room}:<msgId>    "pos:<epoch>:<pos>" (claim TTL, 60 s) job         dedup: a message's claim with its position; an event's
//	                                                                                  "claim:<owner>" (job.claim_ttl), then "done" (60 s);
//	                                                                                  "done" (logic, 24 h) for an id deleted before its position
//	msg:processed:user:{user}:<id>  the same                              job         dedup of a notice to the user (the tag of user:online:{user})
//	msg:processed:all:{all}:<id>    the same                              job         dedup of a broadcast notice
//	room:cooldown:{room}            string, PX job.window (1 s)           job         one broadcast window of the room
//	lock:broadcast:{room}           unique token, PX job.lock_ttl (5 s)   job         one broadcaster per room; compare-and-delete
//	room:timeline:{room}            hash epoch, seq, dels; TTL history    job         the epoch, last position and ids deleted in it
//	room:history:{room}             list of message JSON, oldest first    job         the newest job.history_size (without pos); same TTL
//	room:dels:{room}                list of message ids                   job         the epoch's deletion log, newest DelLogSize; same TTL
//	room:ban:{room}:<user>          the ban's end (Unix ms); TTL the ban  logic       read by the send check and the registration script
//	room:state:{room}               hash ver, slow, members, unique,      logic       the room's settings (danmaku.RoomState) and hidden users; no TTL
//	                                hide.<user> -> end (Unix ms), pin,    the pin (danmaku.Pin JSON), its id and version;
//	                                pinid, pinver, word.<word> -> mode,   the room's edited blocked words (words.go), their
//	                                wordn, wordver                        number and version
//	room:slow:{room}:<user>         "1", PX the room's slow mode          logic       the user sent to the room within the slow-mode interval
//	room:unique:{room}:<digest>     "1", PX the room's unique chat        logic       a content (digest of its plain form) sent within the interval
//	mute:user:{user}                the mute's end (Unix ms); TTL the mute logic      the user is muted everywhere
//	mute:user:{user}:room:<room>    the same                              logic       ... in one room (the tag of the user's bucket)
//	admin:audit                     list of JSON entries, newest first    logic       the admin actions (danmaku.AuditEntry), newest logic.AuditSize
//	admin:words                     hash word.<word> -> mode, wordn,      logic       the edited global blocked words (words.go)
//	                                wordver
//	admin:sanctions                 zset kind:user:room -> end (Unix ms)  logic       every active mute and ban, for the lists (room "" for a mute everywhere)
//	room:sanctions:{room}           zset kind:user -> end (Unix ms)       logic       the room's active mutes and bans, for the lists
//	send:rules                      JSON (sendpath.Rules); TTL 10 min+    logic       the send path's rules (limits, rate limits, blocked words) the comets apply
//	room:review:{room}              hash id -> item JSON; TTL review_ttl  logic       comments held for review (danmaku.ReviewItem)
//	room:reviewq:{room}             zset id -> accept time (ms); the same logic       their order; items older than logic.review_ttl are removed
//	room:held:{room}                zset id -> release time (ms); TTL     job         comments the room's delay holds in job, until their release or delete
//	                                a minute after the last release
//	room:heldm:{room}               hash id -> item JSON; the same        job         those comments (danmaku.HeldItem), for the moderators' list
//	room:reviewc:{room}             zset id -> claim end (ms); the same   logic       items an approval is writing (out of the queue until written or the claim ends)
//	room:reviewk:{room}             hash <uid>:<digest> -> id, #id -> key logic       held items by sender and content, so a retry without msgId is queued once
//	ratelimit:user:{user}           token bucket "tokens:ms"              logic       per-user send budget, on the Redis clock
//	ratelimit:ip:{addr}             the same                              logic       per-address budget (IPv6: its /64)
//	ratelimit:high:{room}           the same                              logic       the room's high-priority budget (logic.high_rate_limit)
//
// A connId names one registration: one room of one connection. A comet
// whose connection holds several rooms registers each under an id of its
// own (the connection id, then the id with a sequence number), so every
// key above sees one room per id, and user:online lists a user's rooms of
// all their connections (each naming the comet to push to).
//
// Braces are literal Redis Cluster hash tags: every key of one room is on one
// shard, so the per-room scripts (register, unregister, the delivery guards)
// run unchanged on a cluster. Ids are checked with danmaku.CheckID
// before any key is built; an invalid id is an EINVALID error naming the
// field and Redis is not touched.
//
// Ids are validated at the doors of the system: logic checks every id of
// a request, job every record it consumes (danmaku.UnmarshalEnvelope), a
// comet the /ws URL, the client frames and job's push bodies
// (danmaku.UnmarshalPush). The roles trust what passed a door and check
// nothing again, except here: route is the one place that turns ids into
// keys, and an id with a brace, a colon or a '*' would put a key on
// another hash slot (a cluster script then fails on every call of that
// room) or inside another key's namespace. So route keeps its own check
// as a defence in depth, against a door forgotten by the next feature: it
// is a table lookup per byte, a few nanoseconds per id, against a
// microsecond to encode the message once (TestInvalidIDsNeverReachRedis).
//
// # Registry
//
// Register and Unregister are one pipelined round trip each (two on a
// cluster: the comet's index entry is written before and removed after the
// other records, so a call cut short by a lost master leaves only traces
// the index lists, which Reconcile removes or completes). The room's
// connection set and its per-comet counts change in one Lua script, so the
// sum of room:comets:{room} always equals SCARD room:connections:{room}; a
// count that drops to zero loses its field. The per-connection and per-user
// hashes live on their own slots (their hash tag is the connection or user
// id) and are written in the same pipeline. Both calls are idempotent.
//
// room:comets:{room} answers "which comets hold this room" with one HGETALL
// whatever the number of viewers; BeginBroadcast reads it.
//
// # Comet leases
//
// A comet calls Heartbeat every few seconds; comet:{cometId} expires when
// it stops. LiveComets lists comets with a current lease (job pushes only to
// those), DeadComets those whose lease expired, and RemoveComet deletes all
// routes of one comet (graceful shutdown, a restart with the same id). The
// janitor uses RemoveDeadComet, which stops as soon as the lease is back: a
// comet cut off by a Redis failover renews it and registers its viewers
// again, and what the janitor removed before it stopped is written again by
// the comet's next renewal.
//
// # Repair
//
// Redis may lose a comet's routes (a restart without persistence, a failover
// to a replica that missed the last writes, a lease that expired in a stall
// and a janitor that removed its routes), and single writes may land late or
// never (a register that ran after its unregister gave up). Three calls let
// a comet heal the registry from what it holds:
//
//   - Heartbeat renews the lease in one script that also reports Lost when
//     the lease was missing or carried another start time, and how many
//     connections comet:connections lists; the comet then re-registers.
//   - RegisterAll registers many connections, 500 per pipeline: one
//     room_sync script per room and slice (room set and count together),
//     the comet index in one HSET per slice, connection:info and
//     user:online in the same pipeline.
//   - Reconcile makes Redis agree with a snapshot of what the comet holds:
//     comet:connections lists exactly the held connections; each is a
//     member of its room, with its records; what the index lists and the
//     comet does not hold is removed everywhere; the comet's count in each
//     room involved equals its members there. It reads the index by HSCAN
//     and checks counts with one HGET per room, so a clean comet of 15,000
//     connections costs about 40 round trips and 460 commands. The comet
//     must not register or unregister while it runs.
//
// All three keep the registry's invariant: room_sync moves a count by
// exactly the members it added or removed, so the sum of room:comets:{room}
// stays SCARD room:connections:{room}; only a count found wrong is set, to
// the comet's held members in the room, after members credited to the comet
// that it does not hold (found through connection:info) are removed. Every
// write is also in the comet's index, so a write that lands late is undone
// by the next Reconcile or by RemoveComet. Per-connection keys have no TTL:
// all are reachable from comet:connections, which shares its slot with the
// lease, so RemoveComet (a restarting comet first) and RemoveDeadComet (the
// janitor, for an expired lease) find them; a refreshed TTL would cost two commands per
// connection per refresh instead of about one per 33 connections.
//
// # Delivery guards
//
// A room batch is guarded by two scripts, one round trip each.
// BeginBroadcast takes the room's lock (SET NX with a token unique to the
// acquisition; held elsewhere: nothing else is touched), opens the cooldown
// window (NX PX) or reports how long the running one lasts (and gives the
// lock back), claims the message ids, reads room:comets:{room} and gives the
// claimed messages their timeline positions (see Timeline). A claim is
// final: msg:processed:{room}:<msgId> is set, NX, to the message's epoch and
// position for 60 s (BeginOptions.ClaimTTL), in the script that writes the
// message to the history, so the key always says where the message is. A
// message whose key holds a position of the room's current epoch is
// Positioned: it keeps that position (a redelivery, a retry, a client's
// second send) and the caller pushes it there. When no id is claimed or
// positioned the lock is given back. Its Status says which of these
// happened. The caller ends the broadcast with ReleaseLock (compare and
// delete); no mark per message is left to write. RenewLock and ReleaseLock
// are compare-and-set scripts and return ErrNotHolder rather than touch
// somebody else's lock. A BeginBroadcast that returned an error may still
// run in Redis (a stall ends after the caller gave up) and then holds the
// lock with a token nobody uses; its Begin.Lock names the token anyway, and
// AbortBroadcast, sent once Redis answers again, releases that lock (and an
// event's claims) in one script; the messages' claims stay with their
// positions.
//
// Per batch of n messages this costs n + 12 commands on the server, Lua
// included: n SETs, and the two script calls, the lock's SET, GET and DEL,
// the window's SET, HMGET, RPUSH, HSET and two PEXPIREs of the timeline,
// and the HGETALL of the routes (an LTRIM once the history is full, a GET
// per id found claimed).
//
// A consumer that crashes between the two leaves the lock to expire and the
// claims in place: the redelivery finds every message it had begun
// Positioned and pushes it at its position, so nothing is lost and nothing
// gets two positions; comets drop the positions they already delivered.
// EndBroadcast marks ids "done" and releases the lock; events use it.
//
// Moderation events (a deletion, a ban) take the same guards without the
// window and the positions: BeginEvent checks the lock is free, claims the
// event's id ("claim:<owner>" for ClaimTTL), takes the lock and reads the room's
// comets, in one script; the caller pushes the event and calls
// EndBroadcast with the event's id.
//
// # Notices
//
// A notice goes to one user (every connection listed in
// user:online:{user}) or to everyone (every comet with a lease). Notices
// have no room, no lock, no window and no position; BeginNotices claims
// their ids like an event's id, in keys of their own (a room id holds no
// ':', so they never meet a room's keys), and reads each user's
// connections in the same script: the claims of one user and
// user:online:{user} share the user's hash tag. One pipelined round trip
// for a batch of any number of users, one script per user; EndNotices
// marks them done the same way. UserComets reads one user's comets.
//
// ActiveRooms lists the rooms with viewers for the moderator console by a
// SCAN of room:comets:{*} on every master, bounded in calls; RoomLoads reads
// their viewer counts and timeline heads in one pipeline.
//
// Each Lua script lives in lua/ and is declared next to the Go function that
// runs it.
//
// # Timeline
//
// Every room has a timeline: an epoch (a random id) and a sequence of
// positions 1, 2, 3... in the order viewers are meant to see the messages.
// BeginBroadcast assigns them, in the same script and round trip as the
// guards, while it takes the room's lock: the claimed messages, in the
// batch's order, get the positions after room:timeline:{room}'s seq and are
// appended to room:history:{room}, which is trimmed to its newest
// HistorySize elements; both keys get HistoryTTL again. The history stores
// each message's JSON without its position: element i (0-based) has
// position seq - LLEN + 1 + i. History reads a range of it with the head in
// one script; Heads reads the heads of many rooms in one pipeline (one HMGET
// per room, so it runs on a cluster).
//
// A deleted message keeps its position: BeginEvent replaces each element of
// its id by a tombstone, {"id":"<id>","deleted":true}, in place (elements
// are a message's JSON, id first, so a script finds them without decoding).
// History returns tombstones with Deleted set at their positions, so a
// reader knows a missing message from a deleted one; the positions after
// it do not move, and no reader sees a gap where there is none.
//
// A new epoch starts at seq 0, with an empty history, when the hash is
// missing (never written, expired, Redis emptied) or when the caller's
// known head (BeginOptions.Known, the last position it assigned) is of the
// stored epoch and beyond the stored seq (a failover to a replica that
// missed writes, a restore of an old snapshot).
//
// Invariants, for any crash of any caller at any point:
//
//   - A position exists only in the history first: positions are assigned
//     and their messages written by one atomic script, before anybody can
//     push them, so a position handed to a comet is in the history until
//     it is trimmed or expires, or its epoch is no longer the room's.
//   - Positions of one epoch are contiguous and never assigned twice: seq
//     and the list change together, and an epoch that lost positions it
//     handed out (the known-head check) is abandoned rather than reused.
//   - Only ids claimed by this call get new positions; an id found
//     positioned in the current epoch keeps its position, one found "done"
//     or claimed by an event's owner gets none, and the timeline does not
//     move for them.
//   - A message has one position per epoch: its claim records it for
//     ClaimTTL (60 s), so a redelivery within that time, whatever crashed,
//     finds it. A claim of an epoch that ended is claimed again: the
//     message gets a position in the new one (viewers start over there).
//
// # Rate limit
//
// Admit is the send check: the user's ban from the room, the user's mute flags, the
// user's bucket and the client address's bucket. On a single server it is
// one script (admit.lua) that checks a whole batch of requests in their
// order: one TIME, one MGET of every bucket and flag the batch names, and
// one SET (value and TTL) per bucket that gave tokens; a request is checked
// against everything before it takes anything, so a refusal spends no
// budget. An Admitter gathers concurrent requests into such batches (group
// commit: one batch in flight, the next gathering meanwhile), which makes
// a send cost about one Redis command, the SET of its user's bucket. On a
// cluster the keys of a batch live on many shards, so Admit pipelines the
// user's script (mute flags and bucket share the user's hash tag), the
// address's and a PTTL of the ban (the room's hash tag), and gives back
// the tokens one script took when another check refused.
//
// Mute and Ban store the flag's end on the Redis clock as its value, with
// the duration as TTL, so the batch reads what a flag still lasts from the
// MGET; a flag holding another value is read with PTTL. Unmute and Unban
// delete them; Register reads the ban in its room script and refuses a
// banned user's connection (BanError).
//
// Every Redis failure is returned as a *danmaku.Error with code
// EUNAVAILABLE; callers map it to 503 or retry.
package route
