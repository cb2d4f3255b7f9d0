// Package transport defines how a rank exchanges messages with its peers.
// Implementations live in the subpackages: local (goroutines of one
// process), shm (processes of one host) and tcp (hosts).
package transport

import (
	"context"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// Transport moves messages between this rank and its peers within one
// communicator.
//
// Messages between an ordered pair of ranks arrive in the order they were
// sent. Each message carries the sender's fingerprint; Recv compares it with
// the receiver's and fails with an *errs.MismatchError when they differ or
// when the message length is not len(p).
//
// Send returns once p may be reused; it may or may not wait for the receiver
// (callers must assume it can). Send and Recv to different peers, and one
// Send and one Recv to the same peer, may run concurrently; concurrent Sends
// (or Recvs) on the same peer are not allowed.
//
// Every method honours ctx and returns promptly after Abort. When a peer
// fails or aborts, calls that wait on it return an *errs.PeerError.
type Transport interface {
	Rank() int
	Size() int
	Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error
	Recv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error
	// Abort fails pending and later calls locally and tells peers, without
	// waiting for them. cause is passed on to peers when possible.
	Abort(cause error)
	// Close releases resources. It does not wait for peers.
	Close() error
}

// Eager is implemented by transports that can tell whether a send would
// complete at once. TrySend sends p to peer, as Send would, if it can do so
// without waiting for the receiver or for buffer space, and reports whether
// it did; when it reports false nothing was sent. The executor uses it to
// finish small sends on the calling goroutine instead of handing them to a
// worker.
type Eager interface {
	TrySend(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) (bool, error)
}

// Prober is implemented by transports that can tell, without waiting and
// without receiving it, whether the next message from a peer has arrived.
// Arrived reports whether a Recv from peer would find a message (of any
// fingerprint) at once; false also for a bad peer or a closed transport.
// Call it only where a Recv from peer could run (not beside one). The
// zero-copy path polls it before blocking in Recv.
type Prober interface {
	Arrived(peer int) bool
}

// A Sink takes a message's bytes as they arrive, in order: Consume(off, b)
// is given bytes [off, off+len(b)) of the message. Staging returns a buffer
// of at least the message's length, for transports that must land a
// message whole before handing it over.
type Sink interface {
	Consume(off int, b []byte)
	Staging() []byte
}

// SinkReceiver is implemented by transports that can hand a message to a
// Sink straight from their own buffers, so that a receiver that combines
// the message with local data (a reduction) needs no copy of it first.
// RecvSink is Recv for a message of n bytes; on a mismatch nothing is
// consumed.
type SinkReceiver interface {
	RecvSink(ctx context.Context, peer int, fp *wire.Fingerprint, n int, s Sink) error
}

// SinkPeers is implemented by a SinkReceiver that reaches only some peers
// straight (a mux over several transports): SinksTo reports whether
// RecvSink from peer hands over the transport's own buffers rather than
// landing the message in the sink's staging buffer first.
type SinkPeers interface {
	SinksTo(peer int) bool
}

// SinkSender is implemented by transports that copy a message into their
// own buffers piece by piece and can hand each piece, once copied, to a
// Sink: a sender that also needs the message elsewhere (an AllGather's own
// block) copies it from there, warm in the cache, instead of reading it
// from memory a second time. SendSink is Send(peer, p) that also gives s
// every byte of p once, as Consume(off, b) with b holding bytes [off,
// off+len(b)) of p (a transport that sends p without copying it gives s
// p itself).
type SinkSender interface {
	SendSink(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte, s Sink) error
}

// SendReceiver is implemented by transports that can move a send to and
// a receive from one peer on one goroutine, a piece of each in turn,
// rather than on two that wait for each other's CPU. The messages are the
// same as Send's and Recv's: the peer may receive and send them either
// way. SendRecv sends p (handing ps, if not nil, each piece of p as
// SendSink would) while it receives the next message from peer, of n
// bytes, into rs (as RecvSink); it reports false, having done nothing,
// when it cannot move this pair (the caller then sends and receives
// separately).
type SendReceiver interface {
	SendRecv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte, ps Sink, n int, rs Sink) (bool, error)
}

// Exchanger is implemented by transports that can run a pairwise
// reduce-and-exchange with one peer as one fused call: this rank sends
// send to peer and receives the peer's first message (n bytes), which x
// reduces with the local operand into both the message sent back and the
// local result; then it receives the peer's reduced message (len(send)
// bytes), which x lands. On the wire that is two messages each way, cut
// into pieces the transport chooses and interleaved piece by piece (first
// message, reduced message, next piece...), so both ends must run the
// exchange fused: sched.PairExchange names the steps, and the verifier
// checks that they pair up across ranks. ExchangesWith reports whether
// Exchange reaches peer (a mux asks the transport behind it).
type Exchanger interface {
	ExchangesWith(peer int) bool
	Exchange(ctx context.Context, peer int, fp *wire.Fingerprint, send []byte, n int, x ExchangeSink) error
}

// ExchangeSink does an Exchanger's arithmetic. Reduce stores the
// reduction of bytes [off, off+len(in)) of the peer's first message with
// the local operand in out (the same bytes of the message sent back) and
// in the local result; Land stores bytes [off, off+len(b)) of the peer's
// reduced message.
type ExchangeSink interface {
	Reduce(off int, out, in []byte)
	Land(off int, b []byte)
}

// Group is implemented by transports that reach every rank of the
// communicator through one shared segment and can run a small collective
// there without point-to-point messages: every rank publishes its
// contribution, stamped with its fingerprint, in a slot of its own and
// reads the slots it needs, in one step for any number of ranks.
//
// GroupMax is the largest contribution in bytes a rank may publish (its
// send buffer, or Broadcast's buffer at the root); 0 means the transport
// cannot run group calls. GroupRun runs the collective fp describes
// (fp.Coll: any but point-to-point traffic; fp.Root; fp.DType and fp.Op
// for the reductions) with this rank's send buffer in and its receive
// buffer out (Broadcast: out only), which may alias as the collective's
// in-place form allows. Every rank reduces the contributions
// in rank order, so results are bitwise the same everywhere. A rank whose
// call differs from a peer's fails with an *errs.MismatchError.
//
// Group calls on one transport must not run concurrently with each other;
// they may run beside Send and Recv. They start without a context: d.Arm
// supplies it when a wait outlasts its polling, so that a call that
// completes at once pays for no deadline.
type Group interface {
	GroupMax() int
	GroupRun(d Deferred, fp *wire.Fingerprint, in, out []byte) error
}

// Deferred supplies the context of a call whose caller arms its deadline
// only when it is needed. Arm returns the context bounding the rest of the
// call; a transport calls it at most once per call, from the calling
// goroutine, before it first looks at a context.
type Deferred interface {
	Arm() context.Context
}
