package hcomm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
	Peer int    // the rank involved in the failure, or -1
	Seq  uint64 // the collective's sequence number on the communicator (1-based; 0 if none was assigned)
	Err  error  // the cause
}

func (e *OpError) Error() string {
	s := "hcomm: " + e.Op
	if e.Seq > 0 {
		s += fmt.Sprintf(" #%d", e.Seq)
	}
	s += fmt.Sprintf(" on rank %d", e.Rank)
	if e.Peer >= 0 {
		s += fmt.Sprintf(" (peer %d)", e.Peer)
	}
	return s + ": " + errs.TrimPrefix(e.Err.Error())
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// timeoutError marks a deadline: it matches ErrTimeout and
// context.DeadlineExceeded.
type timeoutError struct {
	after  time.Duration // the configured timeout, or 0 when the ctx's deadline fired
	report string        // who everyone waits for, when the job could tell
}

func (e *timeoutError) Error() string {
	s := "timed out: the caller's context deadline passed (context deadline exceeded)"
	if e.after > 0 {
		s = fmt.Sprintf("timed out after %v (raise Config.Timeout or HCOMM_TIMEOUT if peers are legitimately slow)", e.after)
	}
	if e.report != "" {
		s += "; " + e.report
	}
	return s
}

func (e *timeoutError) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }

var invalid = errs.Invalid

// relayed keeps the kind of a mismatch that reached this rank as a peer's
// abort: across processes a peer's failure travels as text (the abort
// frame's or the shared segment's reason), so a rank told "rank 2 failed:
// ... mismatched collective ..." would otherwise report only ErrAborted.
// The result also matches ErrMismatch.
func relayed(err error) error {
	var pe *errs.PeerError
	if !errors.As(err, &pe) || pe.Kind != errs.ErrAborted || pe.Cause == nil || errors.Is(err, ErrMismatch) {
		return err
	}
	t := pe.Cause.Error()
	if !strings.Contains(t, "mismatched collective") && !strings.Contains(t, " while this rank called ") {
		return err
	}
	return &relayedMismatch{err}
}

// relayedMismatch is a peer's abort whose reason was a mismatch.
type relayedMismatch struct{ error }

func (e *relayedMismatch) Unwrap() []error { return []error{e.error, ErrMismatch} }

// peerOf extracts the peer an internal error names, or -1.
func peerOf(err error) int {
	var pe *errs.PeerError
	if errors.As(err, &pe) {
		return pe.Peer
	}
	var me *errs.MismatchError
	if errors.As(err, &me) {
		return me.Peer
	}
	return -1
}
