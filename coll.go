package hcomm

import (
	"context"
	"unsafe"

	"github.com/hcomm-go/hcomm/internal/argcheck"
	"github.com/hcomm-go/hcomm/internal/callpath"
	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// call is one collective call after argument checking (callpath.Call).
type call = callpath.Call

// run executes a call (callpath.Path.Run) and, with HCOMM_CHECK_RESULTS,
// checks that every rank got the same result.
func (c *Comm) run(parent context.Context, k *call) error {
	if err := c.path.Run(parent, k); err != nil {
		return err
	}
	if c.set.checkResults {
		return c.checkResults(parent, k)
	}
	return nil
}

// bytesOf views s as bytes.
func bytesOf[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// argErr wraps an argument error.
func (c *Comm) argErr(name string, err error) error {
	return &OpError{Op: name, Rank: c.rank, Peer: -1, Err: err}
}

// The untyped forms. Each takes raw buffers whose element type is dt; the
// typed functions (AllReduce, ...) call them.

// AllReduceBytes is AllReduce over raw buffers of element type dt.
func (c *Comm) AllReduceBytes(ctx context.Context, send, recv []byte, dt DType, op Op) error {
	return c.do(ctx, &args{Coll: sched.AllReduce, Send: send, Recv: recv, DT: int(dt), Op: int(op)})
}

// ReduceBytes is Reduce over raw buffers of element type dt.
func (c *Comm) ReduceBytes(ctx context.Context, send, recv []byte, dt DType, op Op, root int) error {
	return c.do(ctx, &args{Coll: sched.Reduce, Send: send, Recv: recv, DT: int(dt), Op: int(op), Root: root})
}

// BroadcastBytes is Broadcast over a raw buffer of element type dt.
func (c *Comm) BroadcastBytes(ctx context.Context, buf []byte, dt DType, root int) error {
	return c.do(ctx, &args{Coll: sched.Broadcast, Recv: buf, DT: int(dt), Root: root})
}

// AllGatherBytes is AllGather over raw buffers of element type dt.
func (c *Comm) AllGatherBytes(ctx context.Context, send, recv []byte, dt DType) error {
	return c.do(ctx, &args{Coll: sched.AllGather, Send: send, Recv: recv, DT: int(dt)})
}

// AllGatherVBytes is AllGatherV over raw buffers of element type dt.
func (c *Comm) AllGatherVBytes(ctx context.Context, send, recv []byte, counts []int, dt DType) error {
	return c.do(ctx, &args{Coll: sched.AllGather, V: true, Send: send, Recv: recv, Counts: counts, DT: int(dt)})
}

// ReduceScatterBytes is ReduceScatter over raw buffers of element type dt.
func (c *Comm) ReduceScatterBytes(ctx context.Context, send, recv []byte, dt DType, op Op) error {
	return c.do(ctx, &args{Coll: sched.ReduceScatter, Send: send, Recv: recv, DT: int(dt), Op: int(op)})
}

// ReduceScatterVBytes is ReduceScatterV over raw buffers of element type dt.
func (c *Comm) ReduceScatterVBytes(ctx context.Context, send, recv []byte, counts []int, dt DType, op Op) error {
	return c.do(ctx, &args{Coll: sched.ReduceScatter, V: true, Send: send, Recv: recv, Counts: counts, DT: int(dt), Op: int(op)})
}

// AllToAllBytes is AllToAll over raw buffers of element type dt.
func (c *Comm) AllToAllBytes(ctx context.Context, send, recv []byte, dt DType) error {
	return c.do(ctx, &args{Coll: sched.AllToAll, Send: send, Recv: recv, DT: int(dt)})
}

// AllToAllVBytes is AllToAllV over raw buffers of element type dt.
func (c *Comm) AllToAllVBytes(ctx context.Context, send []byte, sendCounts []int, recv []byte, recvCounts []int, dt DType) error {
	return c.do(ctx, &args{Coll: sched.AllToAll, V: true, Send: send, Recv: recv, Counts: sendCounts, RecvCounts: recvCounts, DT: int(dt)})
}

// GatherBytes is Gather over raw buffers of element type dt.
func (c *Comm) GatherBytes(ctx context.Context, send, recv []byte, dt DType, root int) error {
	return c.do(ctx, &args{Coll: sched.Gather, Send: send, Recv: recv, DT: int(dt), Root: root})
}

// ScatterBytes is Scatter over raw buffers of element type dt.
func (c *Comm) ScatterBytes(ctx context.Context, send, recv []byte, dt DType, root int) error {
	return c.do(ctx, &args{Coll: sched.Scatter, Send: send, Recv: recv, DT: int(dt), Root: root})
}

// The typed forms.

// AllReduce combines send from every rank element-wise with op and leaves
// the result in recv on every rank. len(recv) must equal len(send); send and
// recv may be the same slice (in place).
func AllReduce[T Element](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return c.AllReduceBytes(ctx, bytesOf(send), bytesOf(recv), DTypeOf[T](), op)
}

// Reduce is AllReduce with the result only at root. recv matters only at
// the root (len(send) elements; it may be send itself) and may be nil
// elsewhere.
func Reduce[T Element](ctx context.Context, c *Comm, send, recv []T, op Op, root int) error {
	return c.ReduceBytes(ctx, bytesOf(send), bytesOf(recv), DTypeOf[T](), op, root)
}

// Broadcast copies buf from root to every other rank's buf. Every rank
// passes a buf of the same length.
func Broadcast[T Element](ctx context.Context, c *Comm, buf []T, root int) error {
	return c.BroadcastBytes(ctx, bytesOf(buf), DTypeOf[T](), root)
}

// AllGather concatenates every rank's send, in rank order, into every rank's
// recv: len(recv) == Size()*len(send). In place: send is recv's own block,
// recv[Rank()*len(send):][:len(send)].
func AllGather[T Element](ctx context.Context, c *Comm, send, recv []T) error {
	return c.AllGatherBytes(ctx, bytesOf(send), bytesOf(recv), DTypeOf[T]())
}

// AllGatherV is AllGather with a block of counts[r] elements from rank r:
// len(send) == counts[Rank()], len(recv) == sum(counts), blocks contiguous
// in rank order. Every rank passes the same counts.
func AllGatherV[T Element](ctx context.Context, c *Comm, send, recv []T, counts []int) error {
	return c.AllGatherVBytes(ctx, bytesOf(send), bytesOf(recv), counts, DTypeOf[T]())
}

// ReduceScatter reduces send element-wise across ranks with op and leaves
// block r of the result (len(recv) elements) at rank r:
// len(send) == Size()*len(recv). In place: recv is send's own block.
func ReduceScatter[T Element](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return c.ReduceScatterBytes(ctx, bytesOf(send), bytesOf(recv), DTypeOf[T](), op)
}

// ReduceScatterV is ReduceScatter with block r of counts[r] elements:
// len(send) == sum(counts), len(recv) == counts[Rank()]. Every rank passes
// the same counts.
func ReduceScatterV[T Element](ctx context.Context, c *Comm, send, recv []T, counts []int, op Op) error {
	return c.ReduceScatterVBytes(ctx, bytesOf(send), bytesOf(recv), counts, DTypeOf[T](), op)
}

// AllToAll sends block j of send (len(send)/Size() elements) to rank j,
// which stores it as block i of its recv, where i is the sender's rank.
// len(recv) == len(send); they may be the same slice.
func AllToAll[T Element](ctx context.Context, c *Comm, send, recv []T) error {
	return c.AllToAllBytes(ctx, bytesOf(send), bytesOf(recv), DTypeOf[T]())
}

// AllToAllV is AllToAll with blocks of varying size: this rank sends
// sendCounts[j] elements to rank j and receives recvCounts[i] from rank i,
// blocks contiguous in rank order on both sides. Rank i's sendCounts[j]
// must equal rank j's recvCounts[i]. In place (send and recv the same
// slice) needs sendCounts == recvCounts.
func AllToAllV[T Element](ctx context.Context, c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	return c.AllToAllVBytes(ctx, bytesOf(send), sendCounts, bytesOf(recv), recvCounts, DTypeOf[T]())
}

// Gather concatenates every rank's send, in rank order, into root's recv
// (Size()*len(send) elements; nil elsewhere). In place at the root: send is
// recv's block root.
func Gather[T Element](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return c.GatherBytes(ctx, bytesOf(send), bytesOf(recv), DTypeOf[T](), root)
}

// Scatter sends block r of root's send (len(recv) elements each;
// Size()*len(recv) in all, nil elsewhere) to rank r's recv. In place at the
// root: recv is send's block root.
func Scatter[T Element](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return c.ScatterBytes(ctx, bytesOf(send), bytesOf(recv), DTypeOf[T](), root)
}

// checkResultsHook, when set by a test, may alter a rank's result before it
// is hashed.
var checkResultsHook func(rank int, out []byte)

// checkResults compares a hash of the result of a collective whose result
// is the same on every rank (AllReduce, AllGather, Broadcast) across the
// ranks, and fails with ErrMismatch naming the ranks that disagree.
func (c *Comm) checkResults(ctx context.Context, k *call) error {
	switch k.Coll {
	case sched.AllReduce, sched.AllGather, sched.Broadcast:
	default:
		return nil
	}
	out := k.Out
	if checkResultsHook != nil {
		out = append([]byte(nil), out...)
		checkResultsHook(c.rank, out)
	}
	all := make([]uint32, c.size)
	sum := []uint32{diag.ResultHash(out)}
	err := c.path.Run(ctx, &call{Name: "CheckResults", Coll: sched.AllGather,
		Call: argcheck.Call{Count: 1, DT: reduce.Uint32, In: bytesOf(sum), Out: bytesOf(all), Digest: 1}})
	if err == nil {
		if err = diag.CompareResults(all); err != nil {
			err = &OpError{Op: k.Name, Rank: c.rank, Peer: -1, Seq: c.path.Seq - 1, Err: err}
		}
	}
	return err
}
