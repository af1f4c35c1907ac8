// Package logic is the HTTP entry of the broadcast service: it accepts
// comments, checks them, rate-limits senders, stamps each message with an id
// and the server time, and produces it to Kafka (key = room id) for job to
// deliver. A 202 means Kafka acknowledged every message of the request with
// acks = all, so accepted means durable. The messages of concurrent requests
// share produce requests (kafkax.Producer): while one is in flight the next
// gathers every request that arrives meanwhile, each request's messages
// together and in order in its room's partition.
//
// # API
//
//	POST /logic/send            {"roomId","userId","userName","messages":[{"content","msgId"?}]}
//	                            202 {"msgIds":[...]} in request order
//	GET  /logic/online?roomId=  200 {"roomId","online"}
//	GET  /logic/history?roomId=R[&since=P][&limit=N]
//	                            200 {"roomId","epoch","pos","through","messages":[...]} (history.go)
//	GET  /logic/room?roomId=    200 {"roomId","state":{"ver",...}}: the room's settings (roomstate.go)
//	GET  /healthz               200 while the process runs
//	GET  /readyz                200 when Redis and Kafka answer and the topic exists, else 503
//	POST /logic/admin/...       moderation and room settings (admin.go, moderation.go, roomstate.go), Bearer logic.admin_secret
//	POST /logic/push/user       {"userId","messages":[{"content"?,"data"?,"msgId"?}]}
//	POST /logic/broadcast       {"messages":[...]}: notices (notice.go), Bearer logic.admin_secret
//	                            202 {"msgIds":[...]}
//
// # Who sends
//
// With Config.Auth "jwt" a send needs "Authorization: Bearer <JWT>"
// (401 without or with a token that fails auth.Verifier); the user id and
// name are the token's, a body userId naming another user and a room outside
// the token's rooms are 403 permission_denied. With auth off the body's
// userId and userName are taken as given, and New logs so once.
//
// Every error is {"error":{"code","field","message"}} with the status from
// one table (internal/httpx, shared with comet): 400 invalid_argument (field names the input, e.g.
// "messages[0].content", "userId", "body"), 405 method_not_allowed, 413
// payload_too_large (field "body"), 415 unsupported_media_type (field
// "Content-Type"), 429 rate_limited with a Retry-After header in whole
// seconds, 503 unavailable when Redis or Kafka does not answer within
// Config.RedisTimeout / Config.ProduceTimeout.
//
// # Validation (defaults in DefaultConfig)
//
//   - the body is one JSON object of at most 64 KiB sent as
//     application/json; unknown fields are rejected, so a misspelt key
//     cannot silently drop an idempotency key, and so are keys in another
//     case than documented ("ROOMID") or given twice (checkSendKeys);
//   - roomId: 1..64 of [A-Za-z0-9_.-] (danmaku.CheckID);
//   - userId: an integer from 1 to 2^53-1 (sendpath.MaxUserID); userName: 1..32 characters (Unicode code
//     points), not blank, no control characters;
//   - messages: 1..50; content: 1..200 characters, not blank, no control
//     characters other than newline and tab.
//
// # Message ids and idempotency
//
// A message without msgId gets a generated id: 16 characters of lowercase
// base32hex over Unix milliseconds, the node id and a sequence, so ids sort
// by time (see sendpath.IDGen).
//
// A msgId from the client is an idempotency key. It must pass
// danmaku.CheckID and is namespaced by user: user 7 sending "abc" gets (and
// the message carries) the id "u7-abc", so two users choosing the same key
// never share an id and one user cannot suppress another's message. The
// answer returns that namespaced id; a client that resends either "abc" or
// "u7-abc" gets the same id again. Keys of up to sendpath.MaxClientIDLen (40)
// characters are always accepted; longer ones as long as the namespaced id
// fits 64 characters. Generated ids contain no '-', so they never collide
// with namespaced ones.
//
// logic itself keeps no memory of ids: a retry is produced again with the
// same id (and a new timestamp), and job's dedup on (room, id) delivers it
// once. A 503 from a Kafka timeout means "not known to be accepted": the
// producer may still complete the write in the background, so a client that
// retries should reuse its msgId to stay exactly-once on screen.
//
// # Rate limit
//
// Each user has a token bucket in Redis: Config.RateLimit messages per
// second, up to Config.RateBurst at once; each client address another
// (Config.IPRateLimit, IPRateBurst; the address from X-Forwarded-For only
// behind Config.TrustedProxies). A route.Admitter checks both buckets, the
// user's mutes and the user's ban from the room (403 banned) in one Redis
// script call shared by the concurrent requests of a batch
// (Config.AdmitBatchWait, AdmitBatchMax): about one Redis command per
// request under load. A request of n messages
// takes n tokens from both or from neither. Instances share the budgets
// because the buckets live in Redis. Blocked words (Config.BlockedWords)
// are checked before, without Redis.
//
// # Running it
//
// New builds a Server from Config and Deps (the route store, logger,
// metrics registerer and Kafka section). Start listens on Config.Listen,
// creates the topic when it is missing and serves Handler and /metrics; a
// binary that serves several roles on one port mounts Handler instead (and
// calls EnsureTopic). Shutdown drains requests and flushes the producer.
package logic
