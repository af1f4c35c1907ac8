package wsframe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

func TestParseHeader(t *testing.T) {
	key := []byte{1, 2, 3, 4}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		in   []byte
		want frameHeader
		ok   bool
	}{
		{"empty", nil, frameHeader{}, false},
		{"one byte", []byte{0x81}, frameHeader{}, false},
		{"unmasked 7-bit", []byte{0x81, 5}, frameHeader{frameLen: 7, hdrLen: 2, opcode: 1, final: true}, true},
		{"masked 7-bit", cat([]byte{0x89, 0x80 | 3}, key), frameHeader{frameLen: 9, hdrLen: 6, opcode: 9, masked: true, final: true}, true},
		{"masked without its key", []byte{0x89, 0x80 | 3, 1, 2}, frameHeader{}, false},
		{"16-bit short", []byte{0x82, 126, 1}, frameHeader{}, false},
		{"16-bit", []byte{0x82, 126, 1, 0}, frameHeader{frameLen: 4 + 256, hdrLen: 4, opcode: 2, final: true}, true},
		{"16-bit masked", cat([]byte{0x81, 0x80 | 126, 0, 200}, key), frameHeader{frameLen: 8 + 200, hdrLen: 8, opcode: 1, masked: true, final: true}, true},
		{"64-bit short", []byte{0x82, 127, 0, 0, 0, 0, 0, 1, 0}, frameHeader{}, false},
		{"64-bit", []byte{0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0}, frameHeader{frameLen: 10 + 65536, hdrLen: 10, opcode: 2, final: true}, true},
		{"64-bit masked", cat([]byte{0x80, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 9}, key), frameHeader{frameLen: 14 + 9, hdrLen: 14, opcode: 0, masked: true, final: true}, true},
		{"64-bit capped", []byte{0x82, 127, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, frameHeader{frameLen: 10 + maxFrameLen, hdrLen: 10, opcode: 2, final: true}, true},
		{"flags ignored", []byte{0xf8, 0}, frameHeader{frameLen: 2, hdrLen: 2, opcode: 8}, true},
		{"fragment", []byte{0x09, 0}, frameHeader{frameLen: 2, hdrLen: 2, opcode: 9}, true},
	}
	for _, tc := range cases {
		h, ok := parseHeader(tc.in)
		if h != tc.want || ok != tc.ok {
			t.Errorf("%s: parseHeader(% x) = %+v, %v; want %+v, %v", tc.name, tc.in, h, ok, tc.want, tc.ok)
		}
	}
}

// maskedFrame16 encodes a masked client frame with a 16-bit length field,
// whatever the payload length.
func maskedFrame16(opcode byte, payload []byte) []byte {
	key := [4]byte{0xa1, 0xb2, 0xc3, 0xd4}
	b := []byte{0x80 | opcode, 0x80 | 126, byte(len(payload) >> 8), byte(len(payload))}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i&3])
	}
	return b
}

// refSplit is an independent reading of RFC 6455 framing for Conn's
// contract: the bytes it must hand to gorilla, one segment per frame, and
// the payloads of the pings it must consume. Masked ping and pong frames
// with FIN, no RSV bit and at most 125 bytes of payload are consumed once
// complete; every other frame goes to gorilla whole, or up to the end of
// the stream; an incomplete header or consumed frame at the end is never
// handed on.
func refSplit(stream []byte) (segs, pings [][]byte) {
	for pos := 0; pos < len(stream); {
		b := stream[pos:]
		if len(b) < 2 {
			break
		}
		masked := b[1]&0x80 != 0
		plen := uint64(b[1] & 0x7f)
		hdr := map[uint64]int{126: 4, 127: 10}[plen]
		if hdr == 0 {
			hdr = 2
		}
		if masked {
			hdr += 4
		}
		if len(b) < hdr {
			break
		}
		switch plen {
		case 126:
			plen = uint64(b[2])<<8 | uint64(b[3])
		case 127:
			plen = 0
			for _, c := range b[2:10] {
				plen = plen<<8 | uint64(c)
			}
			plen = min(plen, 1<<40)
		}
		total := uint64(hdr) + plen
		op := b[0] & 0x0f
		if (op == 0x9 || op == 0xA) && masked && plen <= 125 && b[0]&0xf0 == 0x80 {
			if uint64(len(b)) < total {
				break
			}
			if op == 0x9 {
				p := make([]byte, plen)
				for i := range p {
					p[i] = b[hdr+i] ^ b[hdr-4+i%4]
				}
				pings = append(pings, p)
			}
			pos += int(total)
			continue
		}
		end := int(min(total, uint64(len(b))))
		segs = append(segs, b[:end])
		pos += end
	}
	return segs, pings
}

// checkFrameConn streams data through a Conn over an in-memory
// connection, written in pieces of wchunk bytes and read with a buffer of
// rsize bytes, and checks it against refSplit: the bytes handed on, each
// Read within one frame, the pings consumed, and the buffer state.
func checkFrameConn(t *testing.T, stream []byte, wchunk, rsize int) {
	segs, wantPings := refSplit(stream)
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		defer client.Close()
		for i := 0; i < len(stream); i += wchunk {
			if _, err := client.Write(stream[i:min(i+wchunk, len(stream))]); err != nil {
				return
			}
		}
	}()
	var pings [][]byte
	f := &Conn{Conn: server, OnPing: func(p []byte) { pings = append(pings, p) }}
	var got []byte
	seg, segOff := 0, 0 // where got ends, as a frame and an offset in it
	p := make([]byte, rsize)
	for {
		atBoundary := f.remain == 0
		ready := f.Pending()
		n, err := f.Read(p)
		if f.r < 0 || f.r > f.w || f.w > frameBufSize || (f.buf == nil && f.w != 0) {
			t.Fatalf("buffer state r=%d w=%d nil=%v", f.r, f.w, f.buf == nil)
		}
		if n == 0 {
			if err == nil {
				t.Fatal("Read returned 0 bytes and no error")
			}
			if ready && atBoundary {
				t.Fatal("pending reported a buffered frame but Read found none")
			}
			break
		}
		if seg >= len(segs) || segOff+n > len(segs[seg]) {
			t.Fatalf("Read of %d bytes at frame %d offset %d crosses a frame boundary (frames %d)", n, seg, segOff, len(segs))
		}
		got = append(got, p[:n]...)
		if segOff += n; segOff == len(segs[seg]) {
			seg, segOff = seg+1, 0
		}
	}
	if want := bytes.Join(segs, nil); !bytes.Equal(got, want) {
		t.Fatalf("handed on % x\nwant       % x", got, want)
	}
	if fmt.Sprint(pings) != fmt.Sprint(wantPings) {
		t.Fatalf("pings %v, want %v", pings, wantPings)
	}
}

// frameStreams are the seeds of FuzzFrameConn and the cases of
// TestFrameConnStreams.
func frameStreams() map[string][]byte {
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	text := maskedFrame(0x1, []byte(`{"op":"ping"}`))
	many := bytes.Repeat(maskedFrame(0x9, []byte("0123456789")), 40)
	return map[string][]byte{
		"text":             text,
		"ping then text":   join(maskedFrame(0x9, []byte("hb")), text),
		"pong then text":   join(maskedFrame(0xA, nil), text, maskedFrame(0xA, []byte("x"))),
		"16-bit ping":      join(maskedFrame16(0x9, []byte("ten bytes!")), text),
		"16-bit big ping":  join(maskedFrame16(0x9, bytes.Repeat([]byte("p"), 130)), text),
		"unmasked ping":    join([]byte{0x89, 2, 'h', 'i'}, text),
		"close":            join(text, maskedFrame(0x8, []byte{0x03, 0xe8})),
		"126 data":         maskedFrame(0x2, bytes.Repeat([]byte("d"), 300)),
		"127 data":         join([]byte{0x82, 127, 0, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c'}, text),
		"huge length":      []byte{0x82, 127, 0xff, 0, 0, 0, 0, 0, 0, 0, 'x'},
		"truncated header": join(text, []byte{0x81}),
		"truncated ping":   join(text, maskedFrame(0x9, []byte("abc"))[:7]),
		"many pings":       join(many, text),
	}
}

func TestFrameConnStreams(t *testing.T) {
	for name, stream := range frameStreams() {
		for _, chunks := range [][2]int{{1, 1}, {3, 2}, {7, 5}, {64, 64}, {4096, 4096}} {
			t.Run(fmt.Sprintf("%s/%d-%d", name, chunks[0], chunks[1]), func(t *testing.T) {
				checkFrameConn(t, stream, chunks[0], chunks[1])
			})
		}
	}
}

// FuzzFrameConn feeds arbitrary client bytes, in arbitrary pieces, through
// the frame-header parser and Conn and checks them against refSplit.
func FuzzFrameConn(f *testing.F) {
	for _, stream := range frameStreams() {
		f.Add(stream, uint8(7), uint8(16))
	}
	f.Fuzz(func(t *testing.T, stream []byte, wchunk, rsize uint8) {
		checkFrameConn(t, stream, int(wchunk)+1, int(rsize)+1)
	})
}

func TestNewFrameConnNeedsASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := New(a); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("New(pipe) = %v, want ErrNotSocket", err)
	}
}

// maskedFrame encodes one client frame (FIN set, 7- or 16-bit length).
func maskedFrame(opcode byte, payload []byte) []byte {
	if len(payload) >= 126 {
		return maskedFrame16(opcode, payload)
	}
	key := [4]byte{0x11, 0x22, 0x33, 0x44}
	b := append([]byte{0x80 | opcode, 0x80 | byte(len(payload))}, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i&3])
	}
	return b
}

// tcpPair returns both ends of a loopback TCP connection, the server's
// wrapped in a Conn.
func tcpPair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	fc, err := New(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return fc, client
}

// WaitReadable consumes complete pongs that arrive while Conn holds
// nothing, calling OnPong after each read of them, and returns once anything
// else is there: a data frame behind them or half a pong, which it leaves
// for Pump, or the end of the connection, which it returns as an error.
func TestWaitReadableConsumesPongs(t *testing.T) {
	fc, client := tcpPair(t)
	pongs := make(chan struct{}, 100)
	fc.OnPong = func() { pongs <- struct{}{} }
	returned := make(chan error, 1)
	wait := func() { go func() { returned <- fc.WaitReadable() }() }
	notReturned := func(what string) {
		t.Helper()
		select {
		case err := <-returned:
			t.Fatalf("WaitReadable returned (%v) after %s", err, what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	countPongs := func(want int) {
		t.Helper()
		for range want {
			select {
			case <-pongs:
			case <-time.After(5 * time.Second):
				t.Fatal("OnPong not called")
			}
		}
	}
	wait()
	client.Write(maskedFrame(opcodePong, nil))
	countPongs(1)
	notReturned("a pong")
	// Eight pongs at once (48 bytes, beyond one peek), with a payload each.
	var many []byte
	for i := range 8 {
		many = append(many, maskedFrame(opcodePong, []byte{byte(i)})...)
	}
	client.Write(many)
	countPongs(1) // once per read of pongs, at least
	notReturned("eight pongs")
	// Half a pong, then the rest: it returns for the half and leaves it
	// to Pump, which takes the rest from the socket.
	pong := maskedFrame(opcodePong, nil)
	client.Write(pong[:3])
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if ready, err := fc.Pump(); err != nil || ready {
		t.Fatalf("Pump = %v, %v; want half a pong kept", ready, err)
	}
	client.Write(pong[3:])
	wait()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if ready, err := fc.Pump(); err != nil || ready || fc.buf != nil {
		t.Fatalf("Pump = %v, %v (buffered %v); want a consumed pong", ready, err, fc.buf != nil)
	}
	// A text frame behind a pong: the pong is consumed, the frame left.
	text := maskedFrame(0x1, []byte("hi"))
	client.Write(append(maskedFrame(opcodePong, nil), text...))
	wait()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if ready, err := fc.Pump(); err != nil || !ready {
		t.Fatalf("Pump = %v, %v; want the text frame ready", ready, err)
	}
	// The end of the connection is an error.
	client.Close()
	fc.r, fc.w, fc.remain = 0, 0, 0
	fc.release()
	wait()
	if err := <-returned; !errors.Is(err, io.EOF) {
		t.Fatalf("WaitReadable after the peer closed = %v, want EOF", err)
	}
}

// A reader driven as the comet's (WaitReadable, Pump, then each frame
// read whole while one is pending) over a real socket hands on exactly
// the data frames of a stream of pongs and text frames however it
// arrives: pongs that straddle WaitReadable's receives, a text frame
// behind pongs, half a frame at the end of a receive.
func TestWaitReadableStreams(t *testing.T) {
	var stream []byte
	var want [][]byte
	for i := range 30 {
		for j := range i % 7 {
			stream = append(stream, maskedFrame(opcodePong, bytes.Repeat([]byte{'p'}, (i+j)%9))...)
		}
		if i%3 == 0 {
			text := maskedFrame(0x1, []byte(fmt.Sprintf(`{"op":"ping","n":%d}`, i)))
			stream = append(stream, text...)
			want = append(want, text)
		}
	}
	for _, chunk := range []int{1, 5, 13, 31, 32, 33, 4096} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			fc, client := tcpPair(t)
			fc.OnPong = func() {}
			go func() {
				for i := 0; i < len(stream); i += chunk {
					client.Write(stream[i:min(i+chunk, len(stream))])
					if chunk > 1 {
						time.Sleep(time.Millisecond)
					}
				}
				client.Close()
			}()
			var got [][]byte
			p := make([]byte, 7)
			for fc.WaitReadable() == nil {
				ready, err := fc.Pump()
				if err != nil {
					break
				}
				for ready {
					var frame []byte
					for {
						n, err := fc.Read(p)
						if err != nil {
							t.Fatalf("read inside a frame: %v", err)
						}
						frame = append(frame, p[:n]...)
						if fc.remain == 0 {
							break
						}
					}
					got = append(got, frame)
					ready = fc.Pending()
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("handed on %d frames % x\nwant %d % x", len(got), got, len(want), want)
			}
		})
	}
}

// TryWrite sends without waiting: whole while the socket has room, 0 bytes
// and no error once it is full.
func TestTryWrite(t *testing.T) {
	fc, client := tcpPair(t)
	if n, err := fc.TryWrite([]byte{0x89, 0}); n != 2 || err != nil {
		t.Fatalf("TryWrite = %d, %v", n, err)
	}
	got := make([]byte, 2)
	if _, err := io.ReadFull(client, got); err != nil || got[0] != 0x89 {
		t.Fatalf("read % x, %v", got, err)
	}
	// The client reads no more: fill the socket until it refuses.
	fc.Conn.(*net.TCPConn).SetWriteBuffer(4096)
	chunk := make([]byte, 4096)
	start := time.Now()
	for {
		n, err := fc.TryWrite(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the socket never filled")
		}
	}
}

// TryWrite writes whatever write deadline gorilla left on the socket.
func TestTryWriteAfterDeadline(t *testing.T) {
	fc, client := tcpPair(t)
	fc.SetWriteDeadline(time.Now().Add(-time.Second))
	if n, err := fc.TryWrite([]byte{0x89, 0}); n != 2 || err != nil {
		t.Fatalf("TryWrite past the deadline = %d, %v", n, err)
	}
	got := make([]byte, 2)
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
}

// Text offers exactly one complete masked, final text frame in the buffer
// to match, with its payload unmasked and RSV1 as compressed, and consumes
// it only when match accepts it.
func TestText(t *testing.T) {
	ping := []byte(`{"op":"ping"}`)
	compressed := maskedFrame(0x1, []byte("xyz"))
	compressed[0] |= 0x40
	rsv2 := maskedFrame(0x1, ping)
	rsv2[0] |= 0x20
	cases := []struct {
		name       string
		buf        []byte
		offered    string
		compressed bool
	}{
		{"heartbeat", maskedFrame(0x1, ping), string(ping), false},
		{"compressed", compressed, "xyz", true},
		{"two frames", append(maskedFrame(0x1, ping), maskedFrame(0x1, ping)...), "", false},
		{"half a frame", maskedFrame(0x1, ping)[:10], "", false},
		{"not final", append([]byte{0x01}, maskedFrame(0x1, ping)[1:]...), "", false},
		{"rsv2", rsv2, "", false},
		{"binary", maskedFrame(0x2, ping), "", false},
		{"unmasked", append([]byte{0x81, byte(len(ping))}, ping...), "", false},
		{"too long", maskedFrame(0x1, bytes.Repeat([]byte("x"), maxText+1)), "", false},
	}
	for _, tc := range cases {
		for _, accept := range []bool{false, true} {
			f := &Conn{buf: new([frameBufSize]byte)}
			f.w = copy(f.buf[:], tc.buf)
			var offered []byte
			var comp bool
			got := f.Text(func(p []byte, c bool) bool {
				offered, comp = append([]byte(nil), p...), c
				return accept
			})
			if string(offered) != tc.offered || comp != tc.compressed {
				t.Errorf("%s: offered %q compressed %v, want %q %v", tc.name, offered, comp, tc.offered, tc.compressed)
			}
			consumed := accept && tc.offered != ""
			if got != consumed || (f.buf == nil) != consumed {
				t.Errorf("%s (accept %v): Text = %v, buffer released %v; want %v", tc.name, accept, got, f.buf == nil, consumed)
			}
		}
	}
}

// WaitReadable offers OnText a small text frame it received whole (behind
// pongs too) and waits on when OnText takes it; a frame OnText refuses is
// left for Pump and returned for.
func TestWaitReadableTakesText(t *testing.T) {
	fc, client := tcpPair(t)
	ping := []byte(`{"op":"ping"}`)
	taken := make(chan string, 10)
	fc.OnPong = func() {}
	fc.OnText = func(p []byte, compressed bool) bool {
		if compressed || !bytes.Equal(p, ping) {
			return false
		}
		taken <- string(p)
		return true
	}
	returned := make(chan error, 1)
	go func() { returned <- fc.WaitReadable() }()
	for _, b := range [][]byte{maskedFrame(0x1, ping), append(maskedFrame(opcodePong, nil), maskedFrame(0x1, ping)...)} {
		client.Write(b)
		select {
		case <-taken:
		case err := <-returned:
			t.Fatalf("WaitReadable returned (%v) for a heartbeat", err)
		case <-time.After(5 * time.Second):
			t.Fatal("OnText not offered the heartbeat")
		}
	}
	join := maskedFrame(0x1, []byte(`{"op":"join"}`))
	client.Write(join)
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if ready, err := fc.Pump(); err != nil || !ready {
		t.Fatalf("Pump = %v, %v; want the join frame ready", ready, err)
	}
	if len(taken) != 0 || fc.w-fc.r != len(join) {
		t.Fatalf("%d more taken, %d bytes buffered; want the join's %d", len(taken), fc.w-fc.r, len(join))
	}
}

// Writes between Cork and Uncork reach the peer only at Uncork, in
// order and whole, also when they are more than the socket takes at
// once; a Write outside a cork goes straight to the socket.
func TestCork(t *testing.T) {
	fc, client := tcpPair(t)
	fc.Conn.(*net.TCPConn).SetWriteBuffer(4096)
	fc.Cork()
	big := bytes.Repeat([]byte("x"), 1<<20)
	for _, b := range [][]byte{[]byte("ab"), big, []byte("cd")} {
		if n, err := fc.Write(b); n != len(b) || err != nil {
			t.Fatalf("corked Write = %d, %v", n, err)
		}
	}
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := client.Read(make([]byte, 8)); n != 0 || err == nil {
		t.Fatalf("read %d bytes (%v) before Uncork", n, err)
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make(chan []byte)
	go func() {
		b := make([]byte, len(big)+4)
		n, err := io.ReadFull(client, b)
		if err != nil {
			t.Errorf("read %d: %v", n, err)
		}
		got <- b
	}()
	fc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := fc.Uncork(); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if len(b) != len(big)+4 || string(b[:2]) != "ab" || string(b[len(b)-2:]) != "cd" {
		t.Fatalf("read %d bytes after Uncork, want %d from ab to cd", len(b), len(big)+4)
	}
	if _, err := fc.Write([]byte("ef")); err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 2)
	if _, err := io.ReadFull(client, tail); err != nil || string(tail) != "ef" {
		t.Fatalf("uncorked Write: read %q, %v", tail, err)
	}
}
