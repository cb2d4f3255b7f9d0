package lifecycle

import (
	"errors"
	"testing"

	"github.com/hcomm-go/hcomm/internal/errs"
)

func TestState(t *testing.T) {
	cause, later := errors.New("lost rank 2"), errors.New("later")
	tests := []struct {
		name   string
		do     func(s *State)
		state  int32
		is     []error // Err matches all
		text   string
		closed bool // a Close after do closes
	}{
		{"new", func(*State) {}, OK, nil, "ok", true},
		{"failed", func(s *State) { s.Fail(cause); s.Fail(later); s.Abort(later) }, Failed, []error{errs.ErrAborted, cause}, "failed", true},
		{"aborted", func(s *State) { s.Abort(cause); s.Fail(later) }, Failed, []error{errs.ErrAborted, cause}, "failed", true},
		{"closed", func(s *State) { s.Close(); s.Fail(cause); s.Abort(cause) }, Closed, []error{errs.ErrClosed}, "closed", false},
	}
	for _, tt := range tests {
		var s State
		tt.do(&s)
		if s.Load() != tt.state || s.String() != tt.text {
			t.Errorf("%s: state %d %q, want %d %q", tt.name, s.Load(), s.String(), tt.state, tt.text)
		}
		err := s.Err()
		if (err == nil) != (tt.is == nil) {
			t.Errorf("%s: Err = %v", tt.name, err)
		}
		for _, e := range tt.is {
			if !errors.Is(err, e) {
				t.Errorf("%s: Err = %v, want it to match %v", tt.name, err, e)
			}
		}
		if errors.Is(err, later) {
			t.Errorf("%s: Err = %v reports a failure after the first", tt.name, err)
		}
		if got := s.Close(); got != tt.closed || s.Load() != Closed || s.Close() {
			t.Errorf("%s: Close = %v, want %v, and a second Close false", tt.name, got, tt.closed)
		}
	}
}

func TestErrAllocs(t *testing.T) {
	var s State
	if n := testing.AllocsPerRun(100, func() { _ = s.Err() }); n != 0 {
		t.Errorf("Err allocates %v times", n)
	}
}
