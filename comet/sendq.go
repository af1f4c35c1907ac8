package comet

import "github.com/danmaku/danmaku/comet/internal/sendq"

// The viewers' send queues (comet/internal/sendq) over the comet's rooms.
type (
	item   = sendq.Item[*room]
	writer = sendq.Writer[*room]
)

// pingItem is the ping every viewer is sent each PingPeriod; it may be
// dropped when the queue overflows.
var pingItem = item{Ping: true, Lossy: true}

// What became of a frame handed to a writer (sendq.Result).
const (
	enqueued   = sendq.Enqueued
	queueFull  = sendq.QueueFull
	connClosed = sendq.ConnClosed
)
