package danmaku

// MaxIDLen is the longest room, user, comet or message id accepted.
const MaxIDLen = 64

// CheckID reports whether id is a valid room, user, connection, comet or
// client message id: 1 to 64 characters of [A-Za-z0-9_.-]. Such an id can be
// embedded in a Redis key (no ':', '*', braces or spaces) and in a URL query.
// The error is EINVALID and names field.
func CheckID(field, id string) error {
	if id == "" {
		return Errorf(EINVALID, field, "must not be empty")
	}
	if len(id) > MaxIDLen {
		return Errorf(EINVALID, field, "longer than %d characters", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return Errorf(EINVALID, field, "character %q at %d not allowed (use A-Z a-z 0-9 _ . -)", id[i], i)
		}
	}
	return nil
}

var idByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	t['_'], t['.'], t['-'] = true, true, true
	return t
}()
