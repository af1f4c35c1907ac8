package client_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/client"
)

// A backend sends comments as one of its users. A retry after a 503 or a
// timeout sends the same idempotency keys, so the comments show once.
func ExampleAPI_Send() {
	exampleStack()
	api := &client.API{URL: logicURL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, err := api.Send(ctx, "", danmaku.SendRequest{
		RoomID: uniq("lobby"), UserID: 7, UserName: "ann",
		Messages: []danmaku.SendMessage{{Content: "hello"}, {Content: "again", MsgID: "k1"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ids), "accepted; the second is", ids[1])
	// Output: 2 accepted; the second is u7-k1
}

// A refusal is an *Error with the status, the code and the field.
func ExampleError() {
	exampleStack()
	api := &client.API{URL: logicURL}
	_, err := api.Send(context.Background(), "", danmaku.SendRequest{
		RoomID: "lobby", UserID: 7, UserName: "ann", Messages: []danmaku.SendMessage{{Content: " "}},
	})
	if e, ok := err.(*client.Error); ok {
		fmt.Println(e.Status, e.Code, e.Field)
	}
	// Output: 400 invalid_argument messages[0].content
}

// A viewer receives a room's messages with their positions. It would
// resume there after a reconnect.
func ExampleViewer() {
	exampleStack()
	room := uniq("lobby")
	v, err := client.NewViewer(client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{room}})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	api := &client.API{URL: logicURL}
	for ev := range v.Events() {
		switch ev.Kind {
		case client.Welcome:
			// Joined: send two comments to the room.
			_, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: room, UserID: 7, UserName: "ann",
				Messages: []danmaku.SendMessage{{Content: "first"}, {Content: "second"}}})
			if err != nil {
				log.Fatal(err)
			}
		case client.Messages:
			for _, m := range ev.Msgs {
				fmt.Printf("%d %s: %s\n", m.Pos, m.Name, m.Content)
			}
			if _, pos, _ := v.Position(room); pos == 2 {
				return
			}
		}
	}
	// Output:
	// 1 ann: first
	// 2 ann: second
}

// A viewer that proves its user with a token receives the notices pushed
// to that user.
func ExampleAPI_PushUser() {
	exampleStack()
	token, err := client.Token{UID: 42, Name: "Ann"}.HS256([]byte(hmacSecret))
	if err != nil {
		log.Fatal(err)
	}
	v, err := client.NewViewer(client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{uniq("lobby")}, Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	api := &client.API{URL: logicURL, AdminSecret: adminSecret}
	for ev := range v.Events() {
		switch ev.Kind {
		case client.Welcome:
			_, err := api.PushUser(context.Background(), 42, danmaku.NoticeMessage{Content: "you received a gift", Data: []byte(`{"gift":"rose"}`)})
			if err != nil {
				log.Fatal(err)
			}
		case client.UserNotices:
			fmt.Println(ev.Notices[0].Content, string(ev.Notices[0].Data))
			return
		}
	}
	// Output: you received a gift {"gift":"rose"}
}

// A moderator's backend deletes a comment: viewers are told, and the
// history forgets it.
func ExampleAPI_Delete() {
	exampleStack()
	room := uniq("lobby")
	api := &client.API{URL: logicURL, AdminSecret: adminSecret}
	ctx := context.Background()
	ids, err := api.Send(ctx, "", danmaku.SendRequest{RoomID: room, UserID: 7, UserName: "ann",
		Messages: []danmaku.SendMessage{{Content: "keep"}, {Content: "oops"}}})
	if err != nil {
		log.Fatal(err)
	}
	// The history holds a message once job delivered it.
	for h := (danmaku.HistoryResponse{}); len(h.Messages) < 2; time.Sleep(50 * time.Millisecond) {
		if h, err = api.History(ctx, "", room, -1, 10); err != nil {
			log.Fatal(err)
		}
	}
	del, err := api.Delete(ctx, danmaku.AdminRequest{RoomID: room, IDs: ids[1:], Actor: "mod-ann"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted", del.Found)
	// The deletion travels the messages' path: the history forgets the
	// message once job applied it.
	var h danmaku.HistoryResponse
	for h.Pos == 0 || len(h.Messages) > 1 {
		time.Sleep(50 * time.Millisecond)
		if h, err = api.History(ctx, "", room, -1, 10); err != nil {
			log.Fatal(err)
		}
	}
	for _, m := range h.Messages {
		fmt.Println(m.Pos, m.Content)
	}
	// Output:
	// deleted 1
	// 1 keep
}

// Tokens for the servers' auth.hmac_secret, or signed with a private key
// (RS256, ES256) whose public key the servers hold.
func ExampleToken() {
	tok, err := client.Token{UID: 42, Name: "Ann", Rooms: []string{"lobby", "live-*"}, TTL: time.Hour}.
		HS256([]byte("a secret of at least 32 bytes, from the config"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Count(tok, "."))
	// Output: 2
}
