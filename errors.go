package hcomm

import (
	"github.com/hcomm-go/hcomm/internal/culprit"
	"github.com/hcomm-go/hcomm/internal/errs"
)

// Sentinel errors. Every error a Comm returns is an *OpError that unwraps to
// one of these (and possibly to more specific causes), so programs test with
// errors.Is.
var (
	// ErrTimeout: the call did not complete within its deadline (the ctx's
	// or Config.Timeout / HCOMM_TIMEOUT). Such errors also match
	// context.DeadlineExceeded.
	ErrTimeout = errs.ErrTimeout
	// ErrAborted: Abort was called on this communicator, a peer aborted, or
	// an earlier failure left the communicator unusable.
	ErrAborted = errs.ErrAborted
	// ErrPeerLost: a peer went away (its process died or closed the
	// communicator) while this rank depended on it.
	ErrPeerLost = errs.ErrPeerLost
	// ErrMismatch: ranks disagree about the collective they are in (a
	// different op, type, count, root, or one rank skipped a call). The
	// message shows both sides.
	ErrMismatch = errs.ErrMismatch
	// ErrClosed: the communicator was closed.
	ErrClosed = errs.ErrClosed
	// ErrInvalidArgument: a length, root, peer, type or operator is not
	// acceptable. Nothing was sent; the communicator is still usable.
	ErrInvalidArgument = errs.ErrInvalidArgument
)

// OpError is the error every operation of a Comm returns.
type OpError struct {
	Op   string // "AllReduce", "Send", "Split", ...
	Rank int    // this rank
	Peer int    // the rank the failure names (lost, aborted, or whose call differed, also when another rank relayed it), or -1
	Seq  uint64 // the collective's sequence number on the communicator (1-based; 0 if none was assigned)
	Err  error  // the cause
}

func (e *OpError) Error() string {
	return errs.OpText(e.Op, e.Seq, e.Rank, e.Peer, e.Err.Error())
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// timeoutError marks a deadline: it matches ErrTimeout and
// context.DeadlineExceeded.
type timeoutError = errs.Timeout

var invalid = errs.Invalid

// peerOf returns the peer an internal error names, or -1.
func peerOf(err error) int { return culprit.Peer(err) }
