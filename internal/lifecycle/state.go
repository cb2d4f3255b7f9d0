// Package lifecycle holds a communicator's state: usable, failed (with the
// first failure, which every later call reports) or closed.
package lifecycle

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// The states, as Load returns them.
const (
	OK int32 = iota
	Closed
	Failed
)

// State is a communicator's state. The zero State is OK. Err costs one
// atomic load while the communicator is usable.
type State struct {
	mu  sync.Mutex
	v   atomic.Int32
	err error // why it failed, set once
}

// Load returns OK, Closed or Failed.
func (s *State) Load() int32 { return s.v.Load() }

// Err returns nil while the communicator is usable, errs.ErrClosed once it
// is closed, and after a failure the error that failure left (wrapping
// errs.ErrAborted).
func (s *State) Err() error {
	if s.v.Load() != OK {
		return s.slowErr()
	}
	return nil
}

func (s *State) slowErr() error {
	if s.v.Load() == Closed {
		return errs.ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Fail marks a usable communicator failed by err: later calls fail with
// ErrAborted wrapping it. It does nothing once failed or closed.
func (s *State) Fail(err error) {
	s.set(fmt.Errorf("%w: communicator unusable after an earlier failure: %w", errs.ErrAborted, err))
}

// Abort marks a usable communicator aborted with cause: later calls fail
// with ErrAborted wrapping it. It does nothing once failed or closed.
func (s *State) Abort(cause error) { s.set(fmt.Errorf("%w: %w", errs.ErrAborted, cause)) }

func (s *State) set(err error) {
	s.mu.Lock()
	if s.v.Load() == OK {
		s.err = err
		s.v.Store(Failed)
	}
	s.mu.Unlock()
}

// Close marks the communicator closed, also after a failure, and reports
// whether this call closed it (false when it was closed already).
func (s *State) Close() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v.Load() == Closed {
		return false
	}
	s.v.Store(Closed)
	return true
}

// String returns "ok", "closed" or "failed".
func (s *State) String() string {
	switch s.v.Load() {
	case OK:
		return "ok"
	case Closed:
		return "closed"
	}
	return "failed"
}
