package rma

import (
	"sync"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// Set is the windows a communicator has open, which its Close releases
// without waiting for the peers. The zero Set is empty and ready to use;
// it is safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	m      map[*Window]struct{}
	closed bool // Close was called: the communicator is closed
}

// Add puts w in the set and reports whether it did: once the set is
// closed it does not, and the caller closes w itself.
func (s *Set) Add(w *Window) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.m == nil {
		s.m = make(map[*Window]struct{})
	}
	s.m[w] = struct{}{}
	return true
}

// Remove takes w out of the set.
func (s *Set) Remove(w *Window) {
	s.mu.Lock()
	delete(s.m, w)
	s.mu.Unlock()
}

// Close closes every window in the set, outside its lock, and empties it.
func (s *Set) Close() {
	s.mu.Lock()
	m := s.m
	s.m, s.closed = nil, true
	s.mu.Unlock()
	for w := range m {
		w.Close()
	}
}

// Strided is the Shape of a 2-D access of rows rows of rowLen bytes,
// pitch bytes apart in the window and localPitch apart in local memory
// (Window.PutStrided, GetStrided); negative rows are an argument error.
func Strided(rows, rowLen, pitch, localPitch int) (Shape, error) {
	if rows < 0 {
		return Shape{}, errs.Invalid("%d rows", rows)
	}
	s := Shape{Rows: rows, Len: rowLen, Pitch: pitch, LocalPitch: localPitch}
	if rows == 0 {
		s.Len = 0
	}
	return s, nil
}
