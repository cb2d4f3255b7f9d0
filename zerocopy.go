package hcomm

import (
	"context"
	"encoding/binary"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// The zero-copy path of collectives on registered memory (Comm.Alloc).
//
// A call is a candidate when the communicator has live Buffers, the call
// is uniform, its collective is AllGather, Broadcast, AllToAll (not in
// place), ReduceScatter or AllReduce, and its larger buffer holds at least
// HCOMM_ZERO_COPY bytes. Every rank decides that alike from the call and
// from Alloc/Free, which are collective. Candidates then exchange one
// small record per rank over the transport (which buffer and offset holds
// the call's input and output); when every rank's buffers the collective
// reads from are registered and mapped everywhere, each rank pulls what it
// needs straight from the peers' mappings into its own output — the
// copy-only collectives with a single copy, the reductions reading every
// rank's input in place — and the ranks then exchange a second record
// (done), after which no rank touches another's memory for this call.
// Otherwise the call runs its program as usual: the records were the
// first messages of the call, so the ranks stay in step.
//
// AllReduce reduces in two phases: rank r reduces segment r of every
// rank's input into its own output, the ranks exchange a record, and each
// rank copies the other segments from the owners' outputs.

const (
	zcRecSize = 32
	zcMagic   = 0x5a43 // "CZ"

	zcIn  = 1 // flags: the input is registered
	zcOut = 2 // the output is registered
)

// zeroCopy reports whether k is a candidate for the zero-copy path.
func (c *Comm) zeroCopy(k *call) bool {
	if c.reg.live.Load() == 0 || k.spec != nil || c.size < 2 || c.set.zeroCopy <= 0 {
		return false
	}
	if max(len(k.in), len(k.out)) < c.set.zeroCopy {
		return false
	}
	switch k.coll {
	case sched.AllGather, sched.Broadcast, sched.ReduceScatter, sched.AllReduce:
		return true
	case sched.AllToAll:
		return !k.inPlace
	}
	return false
}

// runZeroCopy runs candidate k by the zero-copy path, or by prog when the
// ranks' buffers do not allow it. The caller holds c.mu.
func (c *Comm) runZeroCopy(ctx context.Context, prog *sched.Program, fp *wire.Fingerprint, k *call) error {
	c.reg.mu.RLock()
	defer c.reg.mu.RUnlock()
	r := &c.reg
	inID, inOff := r.find(k.in)
	outID, outOff := r.find(k.out)
	rec := r.rec[:]
	clear(rec)
	binary.LittleEndian.PutUint16(rec[0:], zcMagic)
	if inID != 0 {
		rec[2] |= zcIn
	}
	if outID != 0 {
		rec[2] |= zcOut
	}
	binary.LittleEndian.PutUint32(rec[4:], inID)
	binary.LittleEndian.PutUint32(rec[8:], outID)
	binary.LittleEndian.PutUint64(rec[16:], uint64(inOff))
	binary.LittleEndian.PutUint64(rec[24:], uint64(outOff))
	if err := c.zcRound(ctx, fp, rec, r.all); err != nil {
		return err
	}
	var need byte
	switch k.coll {
	case sched.AllReduce:
		need = zcIn | zcOut
	case sched.Broadcast:
		need = zcOut
	default:
		need = zcIn
	}
	for p := range c.size {
		q, ok := decodeZC(r.all[p*zcRecSize:])
		if !ok {
			return invalid("rank %d sent a malformed zero-copy record", p)
		}
		if k.coll == sched.Broadcast && p != k.root {
			continue
		}
		if q.flags&need != need {
			return c.ex.Run(ctx, prog, fp, k.dt, k.op, k.in, k.out)
		}
	}
	if err := c.zcMove(ctx, fp, k); err != nil {
		return err
	}
	r.hits.Add(1)
	// Done: nobody reads or writes another rank's memory after this.
	return c.zcRound(ctx, fp, rec[:zcRecSize], r.all)
}

// zcRound sends rec to every peer and receives each peer's record into
// all[p*zcRecSize:]. Records go out first wherever the transport takes them
// at once (transport.Eager), so a round costs one one-way latency; the
// other pairs talk in a fixed order (lower rank sends first), which never
// deadlocks, even where a Send waits for its Recv: the least pair still
// pending is reached by both of its ranks, and a record already sent only
// removes a wait.
func (c *Comm) zcRound(ctx context.Context, fp *wire.Fingerprint, rec, all []byte) error {
	copy(all[c.rank*zcRecSize:], rec)
	var sent uint64 // bit p: rec already went to p
	if eg, ok := c.t.(transport.Eager); ok && c.size <= 64 {
		for p := range c.size {
			if p == c.rank {
				continue
			}
			ok, err := eg.TrySend(ctx, p, fp, rec)
			if err != nil {
				return err
			}
			if ok {
				sent |= 1 << p
			}
		}
	}
	for p := range c.size {
		if p == c.rank {
			continue
		}
		in := all[p*zcRecSize : (p+1)*zcRecSize]
		switch {
		case sent&(1<<p) != 0:
			if err := c.t.Recv(ctx, p, fp, in); err != nil {
				return err
			}
		case c.rank < p:
			if err := c.t.Send(ctx, p, fp, rec); err != nil {
				return err
			}
			if err := c.t.Recv(ctx, p, fp, in); err != nil {
				return err
			}
		default:
			if err := c.t.Recv(ctx, p, fp, in); err != nil {
				return err
			}
			if err := c.t.Send(ctx, p, fp, rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// zcRecord is one rank's zero-copy record of a call.
type zcRecord struct {
	flags         byte
	inID, outID   uint32
	inOff, outOff uint64
}

// decodeZC decodes a record a peer sent (untrusted: fuzzed).
func decodeZC(q []byte) (zcRecord, bool) {
	if len(q) < zcRecSize || binary.LittleEndian.Uint16(q) != zcMagic {
		return zcRecord{}, false
	}
	return zcRecord{flags: q[2],
		inID: binary.LittleEndian.Uint32(q[4:]), outID: binary.LittleEndian.Uint32(q[8:]),
		inOff: binary.LittleEndian.Uint64(q[16:]), outOff: binary.LittleEndian.Uint64(q[24:])}, true
}

// zcRange returns m[off:off+n], or false when that is not inside m.
func zcRange(m []byte, off uint64, n int) ([]byte, bool) {
	if n < 0 || off > uint64(len(m)) || uint64(n) > uint64(len(m))-off {
		return nil, false
	}
	return m[off : off+uint64(n) : off+uint64(n)], true
}

// peerMem returns rank p's n bytes of the call's input (out: output) as
// mapped here, from p's record in c.reg.all.
func (c *Comm) peerMem(p int, out bool, n int) ([]byte, error) {
	q, ok := decodeZC(c.reg.all[p*zcRecSize:])
	if !ok {
		return nil, invalid("rank %d sent a malformed zero-copy record", p)
	}
	id, off := q.inID, q.inOff
	if out {
		id, off = q.outID, q.outOff
	}
	b := c.reg.byID(id)
	if b == nil {
		return nil, invalid("rank %d names registered buffer %d, which this rank does not have", p, id)
	}
	m := b.b.Peer(p)
	src, ok := zcRange(m, off, n)
	if !ok {
		return nil, invalid("rank %d's registered range [%d, +%d) is outside its buffer of %d bytes", p, off, n, len(m))
	}
	return src, nil
}

// zcMove moves the call's bytes between the mapped buffers.
func (c *Comm) zcMove(ctx context.Context, fp *wire.Fingerprint, k *call) error {
	n, me := c.size, c.rank
	switch k.coll {
	case sched.Broadcast:
		if me == k.root {
			return nil
		}
		src, err := c.peerMem(k.root, true, len(k.out))
		if err != nil {
			return err
		}
		zcCopy(k.out, src)
	case sched.AllGather:
		blk := len(k.in)
		for i := range n {
			p := (me + i) % n
			dst := k.out[p*blk : (p+1)*blk]
			if p == me {
				if !k.inPlace {
					copy(dst, k.in)
				}
				continue
			}
			src, err := c.peerMem(p, false, blk)
			if err != nil {
				return err
			}
			zcCopy(dst, src)
		}
	case sched.AllToAll:
		blk := len(k.in) / n
		for i := range n {
			p := (me + i) % n
			src, err := c.peerMem(p, false, len(k.in))
			if err != nil {
				return err
			}
			zcCopy(k.out[p*blk:(p+1)*blk], src[me*blk:(me+1)*blk])
		}
	case sched.ReduceScatter:
		blk := len(k.out)
		return c.zcReduce(k, me*blk, k.out)
	case sched.AllReduce:
		lo, hi := c.zcSeg(len(k.out), k.dt.Size(), me)
		if err := c.zcReduce(k, lo, k.out[lo:hi]); err != nil {
			return err
		}
		// Every segment is reduced before anyone copies it.
		rec := c.reg.rec[:]
		if err := c.zcRound(ctx, fp, rec, c.reg.all); err != nil {
			return err
		}
		for i := 1; i < n; i++ {
			p := (me + i) % n
			lo, hi := c.zcSeg(len(k.out), k.dt.Size(), p)
			src, err := c.peerMem(p, true, len(k.out))
			if err != nil {
				return err
			}
			zcCopy(k.out[lo:hi], src[lo:hi])
		}
	}
	return nil
}

// zcCopy copies a block of the call's output from a peer's buffer; large
// blocks are written around the caches (reduce.StreamMin).
func zcCopy(dst, src []byte) {
	if len(dst) >= reduce.StreamMin {
		reduce.CopyStream(dst, src)
		return
	}
	copy(dst, src)
}

// zcSeg is rank p's segment [lo, hi) of an n-byte AllReduce of es-byte
// elements.
func (c *Comm) zcSeg(n, es, p int) (lo, hi int) {
	elems := n / es
	return elems * p / c.size * es, elems * (p + 1) / c.size * es
}

// zcReduce reduces bytes [off, off+len(dst)) of every rank's input into
// dst, starting with this rank's own (dst may be exactly that range of
// the input: in place).
func (c *Comm) zcReduce(k *call, off int, dst []byte) error {
	n, me := c.size, c.rank
	first := true
	for i := 1; i < n; i++ {
		p := (me + i) % n
		src, err := c.peerMem(p, false, len(k.in))
		if err != nil {
			return err
		}
		a := k.in[off : off+len(dst)]
		if !first {
			a = dst
		}
		if len(dst) >= reduce.StreamMin && i == n-1 {
			// The last pass writes the result, which nothing here reads
			// again soon: around the caches.
			reduce.ApplyStream(k.dt, k.op, dst, a, src[off:off+len(dst)])
		} else {
			reduce.Apply(k.dt, k.op, dst, a, src[off:off+len(dst)])
		}
		first = false
	}
	return nil
}
