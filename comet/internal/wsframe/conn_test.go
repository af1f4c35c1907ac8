package wsframe

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"
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
