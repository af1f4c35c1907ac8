// Package client is the Go client of the danmaku service, for backends,
// bots and services written in Go.
//
// The server side is API: it calls logic's HTTP API to send comments
// (Send, with idempotency keys kept across its retries), read a room's
// history and viewer count, push notices to a user or to everyone and
// moderate (mute, ban, delete, room modes, pins, reload the blocked
// words). Every refusal is an *Error carrying the HTTP status, the
// service's code and the field it is about. Token mints the JSON Web Tokens the servers verify.
//
// The viewer side is Viewer: it holds one connection to a comet, in one
// or more rooms, and delivers what arrives as Events on a channel:
// messages with their room positions, deletions, notices, viewer counts,
// the rooms' settings and pins, gaps. The connection is a WebSocket, or an
// SSE stream where WebSockets cannot open (ViewerConfig.Transport).
// When the connection ends it reconnects, to the next comet of its list,
// after a jittered backoff, and resumes every room from the epoch and
// position it last received, so no message is lost across a reconnect
// while the room's history holds it, and none is delivered twice (ids
// already delivered are dropped). When a room's timeline cannot be
// recovered the viewer says so with a Gap event.
//
// The wire shapes are the root package's (github.com/danmaku/danmaku);
// the protocol is docs/protocol.md, the HTTP API docs/integrate.md.
package client
