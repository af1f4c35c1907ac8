// Command backend is how a site's backend talks to danmaku: it mints a
// token for one of its users, sends a comment as that user, reads the
// room's history and pushes a notice to the user. It needs logic's address
// and the two secrets of logic's configuration:
//
//	LOGIC_URL=http://localhost:8090 \
//	DANMAKU_AUTH_HMAC_SECRET=... DANMAKU_LOGIC_ADMIN_SECRET=... go run ./docs/examples/backend
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// api calls logic's HTTP API with a bearer token: a user's JWT for
// /logic/send and /logic/history, the admin secret for /logic/admin/*,
// /logic/push/user and /logic/broadcast.
type api struct {
	base   string
	client *http.Client
}

// call sends body (nil: a GET) to path and decodes the answer into out.
// An error answer's code, field and message are in the returned error.
func (a api) call(path, bearer string, body, out any) error {
	method, payload := http.MethodGet, []byte(nil)
	if body != nil {
		method = http.MethodPost
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Field, Message string }
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s: %d %s (field %q): %s", path, resp.StatusCode, e.Error.Code, e.Error.Field, e.Error.Message)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// userToken is the JWT of one user: its id, display name and the rooms it
// may use, valid for an hour.
func userToken(secret []byte, uid, name string, rooms []string) (string, error) {
	claims := jwt.MapClaims{"sub": uid, "name": name, "rooms": rooms, "exp": time.Now().Add(time.Hour).Unix()}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

func main() {
	a := api{base: os.Getenv("LOGIC_URL"), client: &http.Client{Timeout: 10 * time.Second}}
	admin := os.Getenv("DANMAKU_LOGIC_ADMIN_SECRET")
	tok, err := userToken([]byte(os.Getenv("DANMAKU_AUTH_HMAC_SECRET")), "42", "Ann", []string{"lobby"})
	if err != nil {
		log.Fatal(err)
	}

	// A comment as user 42. msgId makes a retry of the same request show once.
	var sent struct {
		MsgIDs []string `json:"msgIds"`
	}
	err = a.call("/logic/send", tok, map[string]any{
		"roomId":   "lobby",
		"messages": []map[string]string{{"content": "hello from the backend", "msgId": "welcome-1"}},
	}, &sent)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("accepted:", sent.MsgIDs)

	// The room's last messages, with their positions.
	var history struct {
		Pos      int64 `json:"pos"`
		Messages []struct {
			ID      string `json:"id"`
			Name    string `json:"name"`
			Content string `json:"content"`
			Pos     int64  `json:"pos"`
		} `json:"messages"`
	}
	if err := a.call("/logic/history?roomId=lobby&limit=10", tok, nil, &history); err != nil {
		log.Fatal(err)
	}
	fmt.Println("history up to position", history.Pos, "holds", len(history.Messages), "messages")

	// A notice to every open tab of user 42, whatever room each shows.
	var pushed struct {
		MsgIDs []string `json:"msgIds"`
	}
	err = a.call("/logic/push/user", admin, map[string]any{
		"userId":   42,
		"messages": []map[string]any{{"content": "you received a gift", "data": map[string]string{"gift": "rose"}, "msgId": "gift-981"}},
	}, &pushed)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("notice:", pushed.MsgIDs)
}
