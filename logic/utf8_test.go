package logic

import (
	"net/http"
	"strings"
	"testing"
)

// Bytes that are not UTF-8 in a text field are refused and named, not
// turned into U+FFFD.
func TestInvalidUTF8IsRefused(t *testing.T) {
	e := newEnv(t)
	uid := itoa(newUser())
	for field, body := range map[string]string{
		"userName":            `{"roomId":"u8","userId":` + uid + `,"userName":"ab` + "\xff" + `","messages":[{"content":"x"}]}`,
		"messages[1].content": `{"roomId":"u8","userId":` + uid + `,"userName":"ab","messages":[{"content":"x"},{"content":"` + "\xc3\x28" + `"}]}`,
	} {
		r := e.do(t, http.MethodPost, "/logic/send", "application/json", []byte(body))
		if r.status != http.StatusBadRequest || r.errorBody(t).Field != field || !strings.Contains(r.errorBody(t).Message, "UTF-8") {
			t.Errorf("%s: %d %s", field, r.status, r.body)
		}
	}
}
