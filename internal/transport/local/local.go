// Package local is the in-process transport: ranks are goroutines of one
// process and messages are handed over through channels.
//
// It takes no shortcut the multi-process transports could not take: every
// message is copied from the sender's buffer into the receiver's, carries the
// sender's fingerprint, is matched in order per ordered pair, and a send is a
// rendezvous (it completes only once the receiver has copied it), which is
// the strictest model the schedules are verified against.
package local

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

type msg struct {
	fp *wire.Fingerprint
	p  []byte
}

// ack is the receiver's answer to one message: nil, or the mismatch it
// found (the sender reports it too, so both sides name the disagreement).
type ack struct {
	err error
}

type channel struct {
	msgs chan msg // unbuffered: the handoff is the rendezvous
	acks chan ack // capacity 1: the receiver never blocks on it
}

// Fabric connects the n endpoints of one communicator.
type Fabric struct {
	n   int
	ch  [][]channel // ch[src][dst]
	eps []*Transport

	mu   sync.Mutex
	subs map[string]*pending // sub-fabrics not yet claimed by all their ranks
}

// pending is a sub-fabric and how many of its ranks have claimed it.
type pending struct {
	f       *Fabric
	claimed int
}

// NewFabric returns a fabric of n endpoints.
func NewFabric(n int) *Fabric {
	f := &Fabric{n: n, ch: make([][]channel, n), eps: make([]*Transport, n), subs: map[string]*pending{}}
	for s := range f.ch {
		f.ch[s] = make([]channel, n)
		for d := range f.ch[s] {
			f.ch[s][d] = channel{msgs: make(chan msg), acks: make(chan ack, 1)}
		}
	}
	for r := range f.eps {
		f.eps[r] = &Transport{f: f, rank: r, down: make(chan struct{})}
	}
	return f
}

// Endpoint returns rank's transport.
func (f *Fabric) Endpoint(rank int) *Transport { return f.eps[rank] }

// Sub returns the fabric named key with n endpoints, creating it on first
// use: each of its n ranks asks once, and all get the same fabric. It is how
// the ranks of a split communicator find each other. Once all n have asked,
// f forgets the key (the ranks hold the fabric), so that a program that
// splits again and again does not make f grow; keys must not be reused.
func (f *Fabric) Sub(key string, n int) (*Fabric, error) {
	if n < 1 {
		return nil, fmt.Errorf("local: fabric %q of %d ranks", key, n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.subs[key]
	if !ok {
		s = &pending{f: NewFabric(n)}
		f.subs[key] = s
	} else if s.f.n != n {
		return nil, fmt.Errorf("local: fabric %q has %d ranks, asked for %d", key, s.f.n, n)
	}
	s.claimed++
	if s.claimed == n {
		delete(f.subs, key)
	}
	return s.f, nil
}

// Transport is one rank's endpoint of a Fabric.
type Transport struct {
	f    *Fabric
	rank int

	once  sync.Once
	down  chan struct{} // closed by Abort or Close
	kind  error         // errs.ErrAborted or errs.ErrClosed, set before down is closed
	cause error
}

// Rank returns this endpoint's rank.
func (t *Transport) Rank() int { return t.rank }

// Size returns the number of ranks.
func (t *Transport) Size() int { return t.f.n }

func (t *Transport) checkPeer(peer int) error {
	if peer < 0 || peer >= t.f.n || peer == t.rank {
		return fmt.Errorf("%w: peer %d", errs.ErrInvalidArgument, peer)
	}
	return nil
}

// localErr is the error of a call interrupted by this endpoint going down.
func (t *Transport) localErr() error {
	if t.kind == errs.ErrClosed {
		return errs.ErrClosed
	}
	if t.cause != nil {
		return fmt.Errorf("%w: %w", errs.ErrAborted, t.cause)
	}
	return errs.ErrAborted
}

// peerErr is the error of a call interrupted by peer going down.
func (t *Transport) peerErr(peer int) error {
	p := t.f.eps[peer]
	if p.kind == errs.ErrClosed {
		return &errs.PeerError{Peer: peer, Kind: errs.ErrPeerLost}
	}
	return &errs.PeerError{Peer: peer, Kind: errs.ErrAborted, Cause: p.cause}
}

// Send hands p to peer and waits until peer has copied it.
func (t *Transport) Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	if err := t.checkPeer(peer); err != nil {
		return err
	}
	c := &t.f.ch[t.rank][peer]
	pe := t.f.eps[peer]
	select {
	case c.msgs <- msg{fp: fp, p: p}:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.down:
		return t.localErr()
	case <-pe.down:
		return t.peerErr(peer)
	}
	// The receiver owns the message now and answers right after copying.
	a := <-c.acks
	return a.err
}

// Recv copies the next message from peer into p.
func (t *Transport) Recv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	if err := t.checkPeer(peer); err != nil {
		return err
	}
	c := &t.f.ch[peer][t.rank]
	pe := t.f.eps[peer]
	var m msg
	select {
	case m = <-c.msgs:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.down:
		return t.localErr()
	case <-pe.down:
		return t.peerErr(peer)
	}
	var err error
	switch {
	case *m.fp != *fp:
		err = &errs.MismatchError{Peer: peer, Local: *fp, Remote: *m.fp}
	case len(m.p) != len(p):
		err = &errs.MismatchError{Peer: peer, Local: *fp, Remote: *m.fp,
			Detail: fmt.Sprintf("message of %d bytes, expected %d", len(m.p), len(p))}
	default:
		copy(p, m.p)
	}
	var back error
	if err != nil {
		back = &errs.MismatchError{Peer: t.rank, Local: *m.fp, Remote: *fp,
			Detail: err.(*errs.MismatchError).Detail}
	}
	c.acks <- ack{err: back}
	return err
}

func (t *Transport) shut(kind, cause error) {
	t.once.Do(func() {
		t.kind, t.cause = kind, cause
		close(t.down)
	})
}

// Abort fails pending and later calls on this endpoint and on peers waiting
// for it. It never blocks.
func (t *Transport) Abort(cause error) {
	if cause == nil {
		cause = errors.New("aborted")
	}
	t.shut(errs.ErrAborted, cause)
}

// Close shuts the endpoint down; peers waiting on it see it as lost.
func (t *Transport) Close() error {
	t.shut(errs.ErrClosed, nil)
	return nil
}
