package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// warmup proves the whole path works before measuring: for each comet it
// joins a viewer to a private room, posts one message and waits until the
// viewer receives it. Right after start-up the job's consumer group may not
// have its partitions yet, and messages sent then would only look late.
func warmup(ctx context.Context, comets []string, logicURL string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for k, target := range comets {
		room := fmt.Sprintf("lt-warmup-%d-%d", k, time.Now().UnixNano()%1e9)
		u := url.URL{Scheme: "ws", Host: target, Path: "/ws", RawQuery: "room=" + room}
		c, _, err := websocket.DefaultDialer.DialContext(ctx, u.String(), http.Header{"Origin": {"http://" + target}})
		if err != nil {
			return fmt.Errorf("warm-up viewer on %s: %w", target, err)
		}
		got := make(chan error, 1)
		token := "warmup-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		go func() {
			for {
				_, b, err := c.ReadMessage()
				if err != nil {
					got <- err
					return
				}
				if bytes.Contains(b, []byte(token)) {
					got <- nil
					return
				}
			}
		}()
		err = func() error {
			defer c.Close()
			// Re-post every few seconds: a message produced before the
			// group was assigned still arrives, but a lost first request
			// (logic still connecting to Kafka) would not.
			for {
				body := `{"roomId":"` + room + `","userId":1,"userName":"lt","messages":[{"content":"` + token + `"}]}`
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, logicURL+"/logic/send", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
				select {
				case err := <-got:
					return err
				case <-ctx.Done():
					return fmt.Errorf("warm-up message did not reach comet %s: %w", target, ctx.Err())
				case <-time.After(3 * time.Second):
				}
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}
