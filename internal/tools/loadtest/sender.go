package loadtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// SendSpec describes the senders.
type SendSpec struct {
	// LogicURL is logic's base URL, e.g. http://127.0.0.1:8090.
	LogicURL string
	// Senders is the number of goroutines issuing requests; each keeps
	// its own keep-alive connection.
	Senders int
	// Users is how many distinct userIds the messages rotate through.
	Users int
	// Timeout bounds one request.
	Timeout time.Duration
	// PerPost is the number of messages in one request (default 1).
	PerPost int
	Layout  *Layout
	// Notice "user" posts notices instead of room messages, each to one
	// of Targets users drawn at random (user k is UserBase+k+1; POST
	// /logic/push/user), "all" posts broadcasts (POST /logic/broadcast);
	// both with AdminSecret. Sequences and accepted bitmaps are then per
	// user, or one for the broadcasts (see notice.go).
	Notice      string
	Targets     int
	UserBase    int64
	AdminSecret string
	// CometWS, when set (ws://host:port/ws), sends the messages as send
	// frames on sockets to that comet instead of POSTs (socksend.go).
	CometWS string
	// CentrifugoKey, when set, makes LogicURL a Centrifugo server's: each
	// request is a publication to its HTTP API (POST /api/publish with
	// this API key) whose channel is the room and whose data carries the
	// messages as a send would, accepted on an answer without an error.
	// The same client then measures both systems.
	CentrifugoKey string
	// High sends high-priority messages ("priority":1, contents "lh:")
	// through POST /logic/admin/send with AdminSecret; otherwise contents
	// are "lt:" (density.go).
	High bool
}

// sender posts load-test messages and records what logic answered.
type sender struct {
	spec   SendSpec
	client *http.Client
	url    string
	socks  *sockPool // with SendSpec.CometWS

	next    atomic.Uint64   // global message number
	roomSeq []atomic.Uint64 // next sequence per room

	mu       sync.Mutex
	accepted [][]uint64 // per room: bitmap of accepted sequences
	acc      []int64    // per room: accepted count
	stepAcc  int64      // accepted since reset
	status   map[int]int64
	errs     map[string]int64
	lat      Hist
	perSec   map[int64]int64 // accepted, by second of the answer
	sent     int64           // messages
	posts    int64           // requests
	late     int64
	maxLag   time.Duration
}

func newSender(spec SendSpec) *sender {
	if spec.Senders <= 0 {
		spec.Senders = 64
	}
	if spec.Users <= 0 {
		spec.Users = 1000
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 5 * time.Second
	}
	if spec.PerPost <= 0 {
		spec.PerPost = 1
	}
	n, path := 0, "/logic/send"
	switch spec.Notice {
	case "user":
		n, path = spec.Targets, "/logic/push/user"
	case "all":
		n, path = 1, "/logic/broadcast"
	default:
		n = len(spec.Layout.Rooms)
		if spec.High {
			path = "/logic/admin/send"
		}
		if spec.CentrifugoKey != "" {
			path = "/api/publish"
		}
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	var socks *sockPool
	if spec.CometWS != "" {
		socks = &sockPool{url: spec.CometWS, users: spec.Users}
	}
	return &sender{
		spec: spec, client: &http.Client{Transport: tr}, url: spec.LogicURL + path, socks: socks,
		roomSeq: make([]atomic.Uint64, n), accepted: make([][]uint64, n), acc: make([]int64, n),
		status: map[int]int64{}, errs: map[string]int64{}, perSec: map[int64]int64{},
	}
}

// post sends request number i (PerPost messages, all to one room) and
// records the outcome.
func (s *sender) post(ctx context.Context, i uint64, buf *bytes.Buffer) {
	room := s.target(i)
	k := uint64(s.spec.PerPost)
	first := s.roomSeq[room].Add(k) - k
	start := time.Now()
	buf.Reset()
	switch {
	case s.spec.Notice != "":
		s.noticeBody(buf, room)
	case s.spec.CentrifugoKey != "":
		buf.WriteString(`{"channel":"`)
		buf.WriteString(s.spec.Layout.Rooms[room])
		buf.WriteString(`","data":{"userId":`)
		buf.WriteString(strconv.FormatUint(1+i%uint64(s.spec.Users), 10))
		buf.WriteString(`,"messages":[`)
	default:
		buf.WriteString(`{"roomId":"`)
		buf.WriteString(s.spec.Layout.Rooms[room])
		buf.WriteString(`","userId":`)
		buf.WriteString(strconv.FormatUint(1+i%uint64(s.spec.Users), 10))
		buf.WriteString(`,"userName":"lt",`)
		if s.spec.High {
			buf.WriteString(`"priority":1,`)
		}
		buf.WriteString(`"messages":[`)
	}
	for j := uint64(0); j < k; j++ {
		if j > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"content":"`)
		buf.WriteString(s.prefix())
		buf.WriteString(strconv.FormatUint(first+j, 10))
		buf.WriteByte(':')
		buf.WriteString(strconv.FormatInt(start.UnixNano(), 10))
		buf.WriteString(`"}`)
	}
	buf.WriteString(`]}`)
	if s.spec.CentrifugoKey != "" {
		buf.WriteByte('}')
	}
	code, err := s.do(ctx, room, buf.Bytes())
	end := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent += int64(k)
	s.posts++
	switch {
	case err != nil:
		why := "transport error"
		if errors.Is(err, context.DeadlineExceeded) {
			why = "timeout"
		}
		s.errs[why]++
	case code == http.StatusAccepted:
		s.lat.Add(end.Sub(start))
		for seq := first; seq < first+k; seq++ {
			w := seq / 64
			for uint64(len(s.accepted[room])) <= w {
				s.accepted[room] = append(s.accepted[room], 0)
			}
			s.accepted[room][w] |= 1 << (seq % 64)
		}
		s.acc[room] += int64(k)
		s.stepAcc += int64(k)
		s.perSec[end.Unix()] += int64(k)
	default:
		s.lat.Add(end.Sub(start))
		s.status[code]++
	}
}

// do sends one request's body and returns the answer's status: a POST, or
// with SendSpec.CometWS a send frame of its room and messages.
func (s *sender) do(ctx context.Context, room int, body []byte) (int, error) {
	if s.socks != nil {
		msgs := body[bytes.Index(body, []byte(`"messages":`))+len(`"messages":`) : len(body)-1]
		return s.postSocket(ctx, s.spec.Layout.Rooms[room], msgs)
	}
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if s.spec.AdminSecret != "" {
		req.Header.Set("Authorization", "Bearer "+s.spec.AdminSecret)
	}
	if s.spec.CentrifugoKey != "" {
		req.Header.Set("X-API-Key", s.spec.CentrifugoKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if s.spec.CentrifugoKey != "" {
		// Centrifugo answers 200, with an error object when it refused.
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK && !bytes.Contains(b, []byte(`"error"`)) {
			return http.StatusAccepted, nil
		}
		return resp.StatusCode, nil
	}
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// prefix starts the content of each message: "lt:", or "lh:" for high
// priority.
func (s *sender) prefix() string {
	if s.spec.High {
		return "lh:"
	}
	return "lt:"
}

// openLoop sends at rate requests per second for d on a fixed schedule:
// message k is due at start + k/rate whatever the server's latency, so a
// slow server shows as latency, not as a lower offered load.
func (s *sender) openLoop(ctx context.Context, rate float64, d time.Duration) {
	total := uint64(rate * d.Seconds())
	base := s.next.Load()
	var k atomic.Uint64
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < s.spec.Senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				n := k.Add(1) - 1
				if n >= total || ctx.Err() != nil {
					return
				}
				due := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
				if w := time.Until(due); w > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(w):
					}
				} else if -w > 10*time.Millisecond {
					s.mu.Lock()
					s.late++
					if -w > s.maxLag {
						s.maxLag = -w
					}
					s.mu.Unlock()
				}
				s.post(ctx, base+n, &buf)
			}
		}()
	}
	wg.Wait()
	s.next.Store(base + total)
}

// closedLoop runs conc goroutines that post back to back for d.
func (s *sender) closedLoop(ctx context.Context, conc int, d time.Duration) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for time.Now().Before(deadline) && ctx.Err() == nil {
				s.post(ctx, s.next.Add(1)-1, &buf)
			}
		}()
	}
	wg.Wait()
}

// SendStats is the senders' part of the report.
type SendStats struct {
	Sent         int64            `json:"sent"`
	Posts        int64            `json:"posts"`
	Accepted     int64            `json:"accepted"`
	Rejected     map[string]int64 `json:"rejectedByStatus"`
	Errors       map[string]int64 `json:"errors"`
	LateSends    int64            `json:"lateSends"` // started >10 ms after their slot
	MaxLagMs     float64          `json:"maxScheduleLagMs"`
	PostP50Ms    float64          `json:"postP50Ms"`
	PostP99Ms    float64          `json:"postP99Ms"`
	PostMaxMs    float64          `json:"postMaxMs"`
	AcceptedPerS float64          `json:"acceptedPerSecond"`
	DurationS    float64          `json:"durationSeconds"`
}

func (s *sender) stats(d time.Duration) SendStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SendStats{Sent: s.sent, Posts: s.posts, Rejected: map[string]int64{}, Errors: map[string]int64{},
		LateSends: s.late, MaxLagMs: ms(s.maxLag), PostP50Ms: s.lat.Quantile(0.5),
		PostP99Ms: s.lat.Quantile(0.99), PostMaxMs: s.lat.Max(), DurationS: d.Seconds()}
	st.Accepted = s.stepAcc
	for c, n := range s.status {
		st.Rejected[strconv.Itoa(c)] = n
	}
	for e, n := range s.errs {
		st.Errors[e] = n
	}
	if d > 0 {
		st.AcceptedPerS = float64(st.Accepted) / d.Seconds()
	}
	return st
}

// reset clears the counters between ingest steps (sequences keep going).
func (s *sender) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stepAcc = 0
	s.status = map[int]int64{}
	s.errs = map[string]int64{}
	s.lat = Hist{}
	s.sent, s.posts, s.late, s.maxLag = 0, 0, 0, 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
