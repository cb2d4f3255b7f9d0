// Package culprit decides which rank a failure names: the peer an error
// involves, the rank whose loss is the root cause, and the origin of a
// failure a peer relayed. A rank's errors name the culprit in
// OpError.Peer and in their text; the failure notes and the notice in the
// job's store (internal/notice) tell a rank what its peers saw before they
// failed.
package culprit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/notice"
)

// Peer returns the peer an error names, or -1.
func Peer(err error) int {
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

// Lost returns the rank (of size) whose loss err reports, or -1.
func Lost(err error, size int) int {
	var pe *errs.PeerError
	if errors.As(err, &pe) && pe.Kind == errs.ErrPeerLost && pe.Peer >= 0 && pe.Peer < size {
		return pe.Peer
	}
	return -1
}

// Relayed keeps the kind of a mismatch that reached this rank as a peer's
// abort: across processes a peer's failure travels as text (the abort
// frame's or the shared segment's reason), so a rank told "rank 2 failed:
// ... mismatched collective ..." would otherwise report only ErrAborted.
// The result also matches ErrMismatch.
func Relayed(err error) error {
	var pe *errs.PeerError
	if !errors.As(err, &pe) || pe.Kind != errs.ErrAborted || pe.Cause == nil || errors.Is(err, errs.ErrMismatch) {
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

func (e *relayedMismatch) Unwrap() []error { return []error{e.error, errs.ErrMismatch} }

// FromNotice is the error a failure notice reports to rank self of size:
// the rank it lost, or the origin of the failure it relays (errs.Origin),
// or its publisher.
func FromNotice(n notice.Note, self, size int) *errs.PeerError {
	if n.Lost >= 0 {
		return &errs.PeerError{Peer: n.Lost, Kind: errs.ErrPeerLost,
			Cause: fmt.Errorf("lost, as rank %d reported: %s", n.From, n.Text)}
	}
	var pe *errs.PeerError
	errors.As(errs.Origin(&errs.PeerError{Peer: n.From, Kind: errs.ErrAborted, Cause: errors.New(n.Text)}, self, size), &pe)
	return pe
}

// Notes is where the failure notes of a communicator's ranks are read:
// boot.Job, in the job's store.
type Notes interface {
	// FailureNote returns the note of the rank whose world rank is
	// world, if it published one (waiting a bounded time).
	FailureNote(id string, world, size int) (notice.Note, bool)
	// WatchNotice waits for the communicator's notice.
	WatchNotice(ctx context.Context, id string, size int) (notice.Note, error)
}

// NoticeWait bounds how long a rank whose lost peer left no note looks for
// the communicator's notice.
const NoticeWait = 100 * time.Millisecond

// Finder finds the root cause of the failures one communicator's rank
// sees, with its ranks' notes. The zero Finder (no Notes: NewLocal) leaves
// every error as it is.
type Finder struct {
	Notes   Notes
	ID      string // the communicator
	Rank    int
	Members []int // the world rank of each rank

	notice   atomic.Pointer[errs.PeerError] // the root cause another rank published
	mu       sync.Mutex
	lostErr  error // the last peer error looked up, and
	lostNote error // what it came to
}

// Noticed records the communicator's notice, published by another rank,
// and returns the error it reports.
func (f *Finder) Noticed(n notice.Note) *errs.PeerError {
	perr := FromNotice(n, f.Rank, len(f.Members))
	f.notice.Store(perr)
	return perr
}

// WhyLost finds the root cause of a peer's failure: a peer whose
// connection dropped, or that aborted, after publishing a note that names
// a lost rank is not the culprit; that rank is. A peer that published a
// note of another kind is reported as having aborted, with its reason.
// Once another rank published the communicator's notice, its root cause
// stands for whatever follows.
func (f *Finder) WhyLost(err error) error {
	var pe *errs.PeerError
	size := len(f.Members)
	if f.Notes == nil || !errors.As(err, &pe) || pe.Peer < 0 || pe.Peer >= size || pe.Peer == f.Rank {
		return err
	}
	if n := f.notice.Load(); n != nil {
		if errors.Is(err, n) || n.Kind == errs.ErrPeerLost && n.Peer == pe.Peer && pe.Kind == errs.ErrPeerLost {
			return err
		}
		return n
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lostErr == err {
		return f.lostNote
	}
	out := err
	if n, ok := f.Notes.FailureNote(f.ID, f.Members[pe.Peer], size); ok {
		switch {
		case n.Lost >= 0 && n.Lost != pe.Peer && n.Lost != f.Rank:
			out = &errs.PeerError{Peer: n.Lost, Kind: errs.ErrPeerLost,
				Cause: fmt.Errorf("lost, as rank %d reported before it failed: %s", pe.Peer, n.Text)}
		case pe.Kind == errs.ErrPeerLost:
			out = &errs.PeerError{Peer: pe.Peer, Kind: errs.ErrAborted,
				Cause: fmt.Errorf("%s (its connection dropped after it reported: %s)", pe.Error(), n.Text)}
		}
	} else if pe.Kind == errs.ErrPeerLost {
		// No word from the peer: unless another rank already published
		// the communicator's failure, the peer itself is the culprit.
		ctx, cancel := context.WithTimeout(context.Background(), NoticeWait)
		n, nerr := f.Notes.WatchNotice(ctx, f.ID, size)
		cancel()
		if nerr == nil && n.From != f.Rank && n.Lost != pe.Peer {
			out = FromNotice(n, f.Rank, size)
		}
	}
	f.lostErr, f.lostNote = err, out
	return out
}

// Cause is the root cause of an error a peer's failure gave this rank:
// WhyLost, then the origin of a relayed failure (errs.Origin), keeping a
// relayed mismatch's kind (Relayed).
func (f *Finder) Cause(err error) error {
	return Relayed(errs.Origin(f.WhyLost(err), f.Rank, len(f.Members)))
}
