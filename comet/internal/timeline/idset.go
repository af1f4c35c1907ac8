package timeline

// IDSet is a bounded set of ids: once it holds its size of them, adding
// one forgets the oldest. The zero value is empty and allocates on the
// first add. It is a room's memory of deleted message ids (Timeline.Gone)
// and the comet's of notice ids.
type IDSet struct {
	ids  map[string]struct{}
	ring []string // a circular buffer of the ids in ids
	next int
}

// Has reports whether id is in the set.
func (s *IDSet) Has(id string) bool {
	_, ok := s.ids[id]
	return ok
}

// Add remembers id in a set of at most size ids and reports whether it
// was new.
func (s *IDSet) Add(id string, size int) bool {
	if s.Has(id) {
		return false
	}
	if s.ids == nil {
		s.ids = map[string]struct{}{}
		s.ring = make([]string, size)
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.ids[id] = struct{}{}
	return true
}
