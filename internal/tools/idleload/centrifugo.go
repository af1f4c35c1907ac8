package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gorilla/websocket"
)

// Centrifugo as the yardstick: the same idle viewers against a Centrifugo
// binary run with its defaults (its ping interval and pong timeout) and
// the least configuration that lets an anonymous client connect and
// subscribe, on a loopback port. Its JSON protocol: a client sends
// {"id":1,"connect":{}} and {"id":2,"subscribe":{"channel":C}} (commands
// separated by newlines in one frame), and answers the server's ping, the
// empty object {}, with {} (client protocol v2).

// centrifugoConfig is the configuration the binary gets: loopback only,
// anonymous clients allowed to connect and subscribe, errors logged only.
const centrifugoConfig = `{
  "http_server": {"address": "127.0.0.1", "port": %d},
  "client": {"insecure": true},
  "log": {"level": "error"}
}
`

// startCentrifugo runs bin with centrifugoConfig in a directory of its own
// under /tmp and waits until it accepts connections.
func startCentrifugo(bin string) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "idle-centrifugo-")
	if err != nil {
		return nil, "", err
	}
	conf := filepath.Join(dir, "config.json")
	if err := os.WriteFile(conf, fmt.Appendf(nil, centrifugoConfig, port), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	cmd := exec.Command(bin, "--config", conf)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	c := &child{cmd: cmd, in: in, external: true, dir: dir}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(20 * time.Second); ; {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
			return c, addr, nil
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, "", fmt.Errorf("centrifugo does not listen on %s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a loopback port nothing listens on.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// joinCentrifugo connects a viewer to Centrifugo and subscribes it to
// channel; it returns once the subscription was answered.
func joinCentrifugo(d *websocket.Dialer, addr, channel string) (*websocket.Conn, []byte, error) {
	c, _, err := d.Dial("ws://"+addr+"/connection/websocket", nil)
	if err != nil {
		return nil, nil, err
	}
	cmds := fmt.Sprintf("{\"id\":1,\"connect\":{}}\n{\"id\":2,\"subscribe\":{\"channel\":%q}}", channel)
	if err := c.WriteMessage(websocket.TextMessage, []byte(cmds)); err != nil {
		c.Close()
		return nil, nil, err
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var replies []byte
	for !bytes.Contains(replies, []byte(`"id":2`)) {
		_, m, err := c.ReadMessage()
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		replies = append(append(replies, m...), '\n')
	}
	if bytes.Contains(replies, []byte(`"error"`)) {
		c.Close()
		return nil, nil, fmt.Errorf("centrifugo refused: %s", bytes.TrimSpace(replies))
	}
	c.SetReadDeadline(time.Time{})
	return c, replies, nil
}

// answerPings reads a Centrifugo viewer's frames and answers each ping
// ({}) with a pong ({}), as its client libraries do.
func answerPings(c *websocket.Conn) {
	pong := []byte("{}")
	for {
		_, m, err := c.ReadMessage()
		if err != nil {
			dropped.Add(1)
			return
		}
		for _, line := range bytes.Split(m, []byte("\n")) {
			if bytes.Equal(bytes.TrimSpace(line), pong) {
				if c.WriteMessage(websocket.TextMessage, pong) != nil {
					return
				}
			}
		}
	}
}
