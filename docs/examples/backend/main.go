// Command backend is how a site's backend talks to danmaku with the Go
// client package: it mints a token for one of its users, sends a comment
// as that user, reads the room's history, pushes a notice to the user and
// watches the room for a moment. It needs logic's address and the two
// secrets of logic's configuration:
//
//	LOGIC_URL=http://localhost:8090 \
//	DANMAKU_AUTH_HMAC_SECRET=... DANMAKU_LOGIC_ADMIN_SECRET=... go run ./docs/examples/backend
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := &client.API{URL: os.Getenv("LOGIC_URL"), AdminSecret: os.Getenv("DANMAKU_LOGIC_ADMIN_SECRET")}

	// The JWT of user 42, valid for an hour in room lobby.
	tok, err := client.Token{UID: 42, Name: "Ann", Rooms: []string{"lobby"}, TTL: time.Hour}.
		HS256([]byte(os.Getenv("DANMAKU_AUTH_HMAC_SECRET")))
	if err != nil {
		log.Fatal(err)
	}

	// A comment as user 42. The msgId makes a retry show once: Send
	// retries a 503 or a lost answer with the same ids (it gives every
	// message without one a random key).
	ids, err := api.Send(ctx, tok, danmaku.SendRequest{
		RoomID:   "lobby",
		Messages: []danmaku.SendMessage{{Content: "hello from the backend", MsgID: "welcome-1"}},
	})
	if err != nil {
		log.Fatal(err) // a *client.Error: status, code and field of a refusal
	}
	fmt.Println("accepted:", ids)

	// The room's newest messages, with their positions.
	h, err := api.History(ctx, tok, "lobby", -1, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("history up to position", h.Pos, "holds", len(h.Messages), "messages")

	// A notice to every open tab of user 42, whatever room each shows.
	notice, err := api.PushUser(ctx, 42, danmaku.NoticeMessage{
		Content: "you received a gift", Data: []byte(`{"gift":"rose"}`), MsgID: "gift-981"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("notice:", notice)

	// Watch the room as user 42 where the comet is known: the viewer
	// resumes from its position whenever its connection ends.
	if ws := os.Getenv("COMET_WS"); ws != "" {
		watch(ctx, api, tok, ws)
	}
}

// watch joins lobby on the comet at ws, sends one comment and prints it
// when it comes back.
func watch(ctx context.Context, api *client.API, tok, ws string) {
	v, err := client.NewViewer(client.ViewerConfig{URLs: []string{ws}, Rooms: []string{"lobby"}, Token: tok})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	for {
		select {
		case <-ctx.Done():
			log.Fatal("no message came back: ", ctx.Err())
		case ev := <-v.Events():
			switch ev.Kind {
			case client.Welcome:
				if _, err := api.Send(ctx, tok, danmaku.SendRequest{RoomID: "lobby",
					Messages: []danmaku.SendMessage{{Content: "watched"}}}); err != nil {
					log.Fatal(err)
				}
			case client.Messages:
				for _, m := range ev.Msgs {
					if m.Content == "watched" {
						fmt.Printf("viewer: %q at position %d\n", m.Content, m.Pos)
						return
					}
				}
			}
		}
	}
}
