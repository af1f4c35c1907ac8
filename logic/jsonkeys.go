package logic

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/danmaku/danmaku"
)

// encoding/json matches object keys case-insensitively and lets the last of
// a repeated key win, so {"roomId":"a","ROOMID":"b"} would be read as room
// b while a misspelt key is refused. checkSendKeys holds a send body to
// the keys as documented: exact case, each at most once.

// Keys of a send body and of one of its messages.
var (
	sendKeys    = []string{"roomId", "userId", "userName", "messages", "priority"}
	messageKeys = []string{"content", "msgId"}
)

// checkSendKeys checks the keys of a send body that encoding/json already
// decoded (so b is valid JSON): a key in another case than documented, or
// a key given twice, is an EINVALID error naming it.
func checkSendKeys(b []byte) error {
	k := keyScan{b: b}
	skip := func([]byte) error { k.skip(); return nil }
	message := func(i int) error {
		if k.peek() != '{' {
			k.skip()
			return nil
		}
		return k.object(i, messageKeys, skip)
	}
	k.space()
	return k.object(-1, sendKeys, func(key []byte) error {
		if string(key) != "messages" || k.peek() != '[' {
			k.skip()
			return nil
		}
		return k.array(message)
	})
}

// keyScan walks valid JSON.
type keyScan struct {
	b []byte
	i int
}

func (k *keyScan) peek() byte { return k.b[k.i] }

func (k *keyScan) space() {
	for k.i < len(k.b) && (k.b[k.i] == ' ' || k.b[k.i] == '\t' || k.b[k.i] == '\n' || k.b[k.i] == '\r') {
		k.i++
	}
}

// object reads the object at k.i, checking each key against allowed, and
// calls value with k.i at each value, which value must consume. msg is the
// index of the message the object is (-1: the body), for error fields.
func (k *keyScan) object(msg int, allowed []string, value func(key []byte) error) error {
	k.i++ // {
	var seen uint64
	for {
		k.space()
		if k.peek() == '}' {
			k.i++
			return nil
		}
		key := k.key()
		if err := checkKey(msg, key, allowed, &seen); err != nil {
			return err
		}
		k.space()
		k.i++ // :
		k.space()
		if err := value(key); err != nil {
			return err
		}
		k.space()
		if k.peek() == ',' {
			k.i++
		}
	}
}

// checkKey refuses key when it is an allowed key in another case, or one
// already seen (a bit per allowed key in seen).
func checkKey(msg int, key []byte, allowed []string, seen *uint64) error {
	for j, a := range allowed {
		switch {
		case string(key) == a && *seen&(1<<j) != 0:
			return danmaku.Errorf(danmaku.EINVALID, keyField(msg, key), "given twice")
		case string(key) == a:
			*seen |= 1 << j
			return nil
		case bytes.EqualFold(key, []byte(a)):
			return danmaku.Errorf(danmaku.EINVALID, keyField(msg, key), "unknown field; keys are case-sensitive: %s", a)
		}
	}
	return nil
}

// keyField names key of message msg (-1: of the body).
func keyField(msg int, key []byte) string {
	if msg < 0 {
		return string(key)
	}
	return "messages[" + strconv.Itoa(msg) + "]." + string(key)
}

// array reads the array at k.i, calling elem with k.i at each element,
// which elem must consume.
func (k *keyScan) array(elem func(i int) error) error {
	k.i++ // [
	for n := 0; ; n++ {
		k.space()
		if k.peek() == ']' {
			k.i++
			return nil
		}
		if err := elem(n); err != nil {
			return err
		}
		k.space()
		if k.peek() == ',' {
			k.i++
		}
	}
}

// key reads the string at k.i as a key, unescaped.
func (k *keyScan) key() []byte {
	start := k.i
	k.str()
	raw := k.b[start:k.i]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	var s string
	json.Unmarshal(raw, &s)
	return []byte(s)
}

// str skips the string at k.i.
func (k *keyScan) str() {
	for k.i++; k.b[k.i] != '"'; k.i++ {
		if k.b[k.i] == '\\' {
			k.i++
		}
	}
	k.i++
}

// skip skips the value at k.i.
func (k *keyScan) skip() {
	switch k.peek() {
	case '"':
		k.str()
	case '{':
		k.object(-1, nil, func([]byte) error { k.skip(); return nil })
	case '[':
		k.array(func(int) error { k.skip(); return nil })
	default: // number, true, false, null
		for k.i < len(k.b) && bytes.IndexByte([]byte(",}] \t\n\r"), k.b[k.i]) < 0 {
			k.i++
		}
	}
}
