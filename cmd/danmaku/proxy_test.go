package main

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections to a server and can act as a network
// path that goes down: cut closes every connection it carries (the page sees
// its socket end without a close frame) and, while down, new connections are
// closed as soon as they are accepted. It records the first request line of
// every connection it forwarded.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	lines []string
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

// URL is the proxy's http base URL, ending in "/".
func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() + "/" }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	defer p.wg.Done()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, up)
		p.mu.Unlock()
		c.Close()
		up.Close()
	}()
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return
	}
	if i := bytes.Index(buf[:n], []byte("\r\n")); i >= 0 {
		p.mu.Lock()
		p.lines = append(p.lines, string(buf[:i]))
		p.mu.Unlock()
	}
	if _, err := up.Write(buf[:n]); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(c, up)
		c.Close()
		close(done)
	}()
	io.Copy(up, c)
	up.Close()
	<-done
}

// setDown makes the path refuse (down) or carry (up) new connections.
func (p *cutProxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// cut closes every connection the proxy carries.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// requestLines returns the first request line of every connection so far.
func (p *cutProxy) requestLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}
