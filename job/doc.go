// Package job is the consumer side of the broadcast pipeline. A Job reads
// the room topic as a member of a Kafka consumer group and, for every room,
// delivers its messages to the comets that hold the room's viewers:
//
//	consume -> buffer per room -> lock -> cooldown -> claim (dedup) + positions -> route -> push -> unlock -> commit
//
// # Semantics
//
// Dedup keys on the message id logic assigned (or the client's idempotency
// key), never on room + time. A message is claimed once, for ProcessedTTL
// (60 s), in the Redis script that gives it its position and writes it to
// the room's history: the claim records the epoch and position, so it is
// final and nothing is marked after the push. A message found claimed
// with a position of the room's current epoch (the redelivery after a
// crash, the retry of a failed push, a client's second send) is pushed
// again at that position and counted as a duplicate; comets drop the
// positions they already delivered, so a viewer sees it once.
//
// Cooldown, policy coalesce (default): the first message of a quiet room
// goes out at once and opens the room's window; messages arriving inside
// the window wait in the room's buffer and go out together, as one batch,
// when it ends. A batch holds at most Budget messages, and no more than
// keep its push body within MaxBatchBytes (below the comets' push limit,
// comet.max_push_bytes, which refuses a larger body); the rest waits for
// the next window, in order (counted as deferred). A room buffer over
// MaxPending drops newly arriving messages (counted, reason "overflow")
// while deliveries succeed; while they fail (Redis or comets down) the
// consumer pauses instead of dropping. Policy drop sends one message per
// window and skips the others, counted (reason "cooldown").
//
// High-priority messages (danmaku.PriorityHigh) are never dropped, by
// overflow or by the drop policy, and never wait for the window: a room
// whose buffer holds one is due at once, and its buffered messages go out
// with it, oldest first and Budget per delivery, so the room's order and
// positions hold; those deliveries skip the cooldown check in Redis too.
// They open the room's window like any batch. logic's per-room
// high-priority rate limit bounds how many there are.
//
// The broadcast lock (token per acquisition, renewed while pushes run,
// released by compare-and-delete) keeps two members of the group from
// broadcasting a room at once while partitions move between them. A lock
// held elsewhere postpones the room by LockRetry; nothing is dropped.
//
// Routes: room:comets:{room} (read by the same script that claims) limited
// to the comets that hold a current lease; one push per comet, in
// parallel, each bounded by PushTimeout. A comet that fails every attempt
// while others took the batch is left out for Quarantine and its share
// counted (reason "comet_failed"); when every comet of a room fails the
// batch is retried with backoff. A janitor removes the routes of comets
// whose lease expired.
// Every message of a finished batch that a comet of the room did not get
// is counted with its reason (danmaku_job_undelivered_total); a comet
// answering 401 is logged at error level once a minute, naming the push
// secret.
//
// A BeginBroadcast that failed here (a Redis stall) may still run in Redis
// when the stall ends and hold the room's lock with a token nobody uses. A
// releaser (release.go) remembers the tokens of failed attempts per room
// and, once Redis answers a ping sent after them, releases that lock and
// the claims with it (route.AbortBroadcast): the room waits one retry, not
// LockTTL.
//
// Timeline: BeginBroadcast gives the claimed messages of a batch the next
// positions of the room's timeline and appends them to the room's history
// (HistorySize messages, HistoryTTL after the last write) in the same round
// trip, under the room's lock. The push body is the room's msgs frame: the
// epoch and every message with its position, consecutive within a batch.
// The scheduler remembers, per room, the head (epoch, last position) its
// deliveries were given, for HistoryTTL after the room's last delivery, and
// passes it to the room's next BeginBroadcast, so a timeline that went back
// in Redis (a failover that lost writes) starts a new epoch instead of
// handing out positions twice. With WaitReplicas set, BeginBroadcast also
// waits (in the same round trip) until that many replicas of the room's
// master hold the batch; fewer in ReplicaTimeout fails the delivery like
// any Redis failure, so no push carries positions a failover can lose.
// Invariants, whatever crashes:
//
//   - A push carries only positions BeginBroadcast returned, so every
//     position a comet sees is in the history (until trimmed or expired) or
//     belongs to an epoch that ended; a comet that finds a gap before a
//     push can always fill it from the history or learn that the epoch
//     changed.
//   - A message gets one position per epoch: the retry of a batch, or the
//     redelivery after a job died anywhere between BeginBroadcast and the
//     push, finds its claim and pushes it at the same position. A push
//     carries consecutive positions only (a comet takes a hole inside a
//     push as lost): when the positions of a batch are not consecutive (a
//     client's second send of an older message among new ones) the push
//     carries the consecutive tail, and comets that lack the earlier ones
//     read them from the history before it, as for any gap.
//   - One job delivers a room at a time (the lock), so pushes of a room
//     leave in position order; a push delayed past the lock's TTL arrives
//     after later positions, and comets drop what they already showed.
//
// Membership: a job begins a delivery only while it can show that it
// belongs to the consumer group generation the delivery's records were
// fetched in, as of less than three quarters of ProcessedTTL ago (an
// accepted commit, or one sent for the purpose: consumer.vouch). A job
// paused past its session loses its partitions, and the member that takes
// them over claims what it delivers for ProcessedTTL; delivered later by
// the first, after those claims expired, the messages would get new
// positions.
//
// Offsets: each partition is committed up to its oldest message not yet
// finished (delivered, skipped as duplicate, or dropped by policy), so a
// crash never commits past an undelivered message.
//
// Moderation events (danmaku.Event: del, ban) share the room's partition
// and buffer. An event is delivered alone, after every message of the room
// before it and before those after it, never dropped by policy or
// overflow, and without waiting for the room's window: BeginEvent claims
// its id and takes the room's lock (a del turns the deleted messages of
// the room's history into tombstones and appends them to the room's
// deletion log in the same script), the event goes to every comet of the
// room, EndBroadcast marks it, and only then is its offset finished; a
// failed push is retried like a batch. Every push of messages carries the
// room's count of deleted ids (Batch.Dels), so a comet left out while a del
// went out catches up.
//
// Notices (to one user, or to everyone) share the topic and these rules
// without the room's window, lock and positions: they queue in lanes (one
// per partition for users, one for broadcasts), a delivery claims their
// ids and reads the users' connections (user:online) in one round trip,
// pushes one body per comet, marks them and lets their offsets be
// committed. A user without a connection is counted (dropped, reason
// "no_route") and finished. See notice.go.
//
// # Structure
//
// A Job wires four parts, each with one task:
//
//   - consumer (consumer.go, fetcher.go): the member of the consumer
//     group (kafka-go's ConsumerGroup: joins, heartbeats, generations).
//     Per generation, one fetch loop per partition leader sends fetch
//     requests covering all of the member's partitions on that broker;
//     each response's records are decoded and handed to the scheduler as
//     one slice. A request waits up to MaxWait for a first record; after a
//     response with several records the next waits up to FetchLinger, so
//     a busy topic is read in a few full fetches. It commits the positions
//     it is handed on its own goroutine, so a slow broker never stalls
//     deliveries. A rebalance ends the generation: fetching stops, the
//     next generation starts each partition at its committed position,
//     and what was read and not committed comes again (dedup covers it).
//   - scheduler (scheduler.go, offsets.go): one goroutine that owns every
//     room buffer, window and retry schedule and the per-partition offsets.
//     Each wake-up takes every slice of records the consumer has ready.
//     It sends a delivery (a room and its batch) to the workers and applies
//     the outcome that comes back (which messages are done, which go back to
//     the room's queue, how long to wait).
//   - deliverer (deliverer.go, push.go, events.go, notice.go, release.go):
//     runs on Workers goroutines, one delivery each: BeginBroadcast, the
//     pushes, ReleaseLock (BeginEvent and EndBroadcast, or BeginNotices, for
//     events and notices); one more goroutine releases what failed
//     attempts took.
//   - comet directory (directory.go): the cache of comets with a current
//     lease, the quarantine of comets that failed, and the janitor.
//
// # Concurrency and lifecycle
//
// Nothing starts a goroutine per message; pushes to the several comets of
// one batch run in parallel. Start starts the member (which joins the group
// in the background) and the goroutines. Shutdown stops fetching, delivers
// what is buffered (bounded by DrainTimeout and by its context), commits and
// leaves the group. Every timeout of a Redis or Kafka call comes from
// Config.
package job
