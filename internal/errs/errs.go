// Package errs holds the error values shared by hcomm's packages. Package
// hcomm re-exports the sentinels; everything else wraps them.
package errs

import (
	"errors"
	"fmt"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// Sentinels. Every error hcomm returns unwraps to one of them.
var (
	ErrTimeout         = errors.New("hcomm: timed out")
	ErrAborted         = errors.New("hcomm: aborted")
	ErrPeerLost        = errors.New("hcomm: peer lost")
	ErrMismatch        = errors.New("hcomm: mismatched collective")
	ErrClosed          = errors.New("hcomm: communicator closed")
	ErrInvalidArgument = errors.New("hcomm: invalid argument")
)

// Invalid returns an error wrapping ErrInvalidArgument.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// PeerError reports that a peer failed, aborted or vanished. It unwraps to
// Kind (ErrPeerLost or ErrAborted) and, when the peer told why, to Cause.
type PeerError struct {
	Peer  int
	Kind  error
	Cause error
}

func (e *PeerError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("rank %d failed: %v", e.Peer, e.Cause)
	}
	if e.Kind == ErrAborted {
		return fmt.Sprintf("rank %d aborted", e.Peer)
	}
	return fmt.Sprintf("lost rank %d", e.Peer)
}

func (e *PeerError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}

// MismatchError reports that two ranks disagree about the call they are in.
type MismatchError struct {
	Peer   int
	Local  wire.Fingerprint
	Remote wire.Fingerprint
	Detail string // optional: what else disagreed (e.g. message lengths)
}

func (e *MismatchError) Error() string {
	s := fmt.Sprintf("rank %d called %v while this rank called %v", e.Peer, e.Remote, e.Local)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// TrimPrefix drops the "hcomm: " of a wrapped sentinel, so that a message
// built around it does not repeat it.
func TrimPrefix(s string) string {
	const p = "hcomm: "
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
