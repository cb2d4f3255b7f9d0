package shm

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

var _ transport.Exchanger = (*Transport)(nil)

// ExchangesWith reports whether Exchange reaches rank: any other rank on
// this host (transport.Exchanger).
func (t *Transport) ExchangesWith(rank int) bool {
	return rank >= 0 && rank < t.size && t.peers[rank] != nil
}

// Exchange runs a pairwise reduce-and-exchange with rank on one goroutine
// (transport.Exchanger): this rank's first message is send, the peer's is
// n bytes long; each piece of the peer's first message is reduced by x
// straight from its ring slot into a slot of the ring back to the peer,
// so the reduced bytes go out from the cache without being read again;
// then the peer's reduced message is landed. The pieces are one ring slot
// each (a message of its own, fingerprinted and length-checked), in the
// order first piece j, reduced piece j, first piece j+1, reduced piece
// j+1...: piece j+1 of send goes out before the peer's reduced piece j is
// awaited, so each end always has the next piece to work on. Both ends
// cut both messages into the same number of pieces, max(len(send), n)
// over a slot, rounded up (pieces past a message's end are empty).
func (t *Transport) Exchange(ctx context.Context, rank int, fp *wire.Fingerprint, send []byte, n int, x transport.ExchangeSink) error {
	pe, err := t.begin(rank, fp)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	out, in := &pe.out, &pe.in
	if atomic.LoadUint32(out.broken) != 0 || atomic.LoadUint32(in.broken) != 0 {
		return brokenError(pe)
	}
	if n < 0 {
		return fmt.Errorf("shm transport: exchange of %d bytes: %w", n, errs.ErrInvalidArgument)
	}
	ps := out.slotBytes
	pieces := max(1, (max(len(send), n)+ps-1)/ps)
	cut := func(l, j int) (lo, hi int) { return min(j*ps, l), min((j+1)*ps, l) }
	fail := func(err error) error {
		t.breakRing(in, err)
		return t.breakRing(out, err)
	}
	// The slots of send's pieces are written through the caches or
	// around them as timing this rank's exchanges of this size chooses:
	// the peer reads each slot at once, from this core's caches when
	// written through them, which cost 2.3× more when cache lines
	// travelled slowly between the two CPUs of the machine this was
	// measured on (a two-core slot ring like this one, under load, median
	// per-sample ratio of 41 samples when a cache-line round trip took
	// 439–486 ns; 1.07× of 31 when it took 89–105 ns; BENCHMARKS.md).
	pick := out.picks.For(len(send) + n)
	nt := !pick.Plain()
	start := time.Now()
	lo, hi := cut(len(send), 0)
	if err := t.xSend(ctx, pe, out, fp, send[lo:hi], nt); err != nil {
		return fail(err)
	}
	for j := range pieces {
		lo, hi := cut(n, j)
		b, err := t.xRecv(ctx, pe, in, fp, hi-lo)
		if err != nil {
			return fail(err)
		}
		if err := t.awaitSpace(ctx, pe, out); err != nil {
			return fail(err)
		}
		(&msgHeader{kind: kindInline, length: uint64(hi - lo), fp: *fp}).encode(out.entry(out.pos))
		x.Reduce(lo, out.payload(out.pos, hi-lo), b)
		in.release()
		out.publish()
		if j+1 < pieces {
			lo, hi := cut(len(send), j+1)
			if err := t.xSend(ctx, pe, out, fp, send[lo:hi], nt); err != nil {
				return fail(err)
			}
		}
		lo, hi = cut(len(send), j)
		b, err = t.xRecv(ctx, pe, in, fp, hi-lo)
		if err != nil {
			return fail(err)
		}
		x.Land(lo, b)
		in.release()
	}
	pick.Took(int64(time.Since(start)))
	return nil
}

// payload returns where the payload of a message of length bytes at
// position i lives: in the entry up to inlineMax bytes, else in the slot.
func (r *ring) payload(i uint32, length int) []byte {
	if length <= inlineMax {
		return r.entry(i)[hdrSize : hdrSize+length]
	}
	return r.slot(i)[:length]
}

// xSend sends one piece of an exchange (at most a slot), written into
// its slot around the caches when nt.
func (t *Transport) xSend(ctx context.Context, pe *peer, r *ring, fp *wire.Fingerprint, p []byte, nt bool) error {
	if err := t.awaitSpace(ctx, pe, r); err != nil {
		return err
	}
	(&msgHeader{kind: kindInline, length: uint64(len(p)), fp: *fp}).encode(r.entry(r.pos))
	if nt && len(p) > inlineMax {
		reduce.CopyStream(r.payload(r.pos, len(p)), p)
	} else {
		copy(r.payload(r.pos, len(p)), p)
	}
	r.publish()
	return nil
}

// xRecv waits for one piece of an exchange, of want bytes, checks its
// header and returns its payload in the ring; the caller releases the
// position.
func (t *Transport) xRecv(ctx context.Context, pe *peer, r *ring, fp *wire.Fingerprint, want int) ([]byte, error) {
	if err := t.awaitData(ctx, pe, r); err != nil {
		return nil, err
	}
	h, err := decodeHeader(r.entry(r.pos))
	if err != nil {
		return nil, t.protocolError(pe, r, err)
	}
	if h.kind != kindInline || h.fp != *fp || h.length != uint64(want) || want > r.slotBytes {
		// The peer does not run the same exchange: another call, or the
		// same one unfused (whole chunks, single copy).
		return nil, mismatch(pe.rank, fp, &h.fp, h.length, want)
	}
	return r.payload(r.pos, want), nil
}

// SendRecv sends p to rank while it receives the next message from rank,
// of n bytes, on the calling goroutine, a ring slot of each in turn
// (transport.SendReceiver): each message is the same on the ring as
// Send's and Recv's, only one goroutine moves both. ps, if set, gets each
// piece of p once copied (as SendSink's sink); rs gets the received
// message (as RecvSink's). It reports false, having done nothing, when p
// would go by single copy, whose sender waits for the reader.
func (t *Transport) SendRecv(ctx context.Context, rank int, fp *wire.Fingerprint, p []byte, ps transport.Sink, n int, rs transport.Sink) (bool, error) {
	pe, err := t.begin(rank, fp)
	if err != nil {
		return false, err
	}
	defer t.mu.RUnlock()
	out, in := &pe.out, &pe.in
	if atomic.LoadUint32(out.broken) != 0 || atomic.LoadUint32(in.broken) != 0 {
		return false, brokenError(pe)
	}
	if t.cmaThreshold > 0 && len(p) >= t.cmaThreshold && !out.cmaOff {
		return false, nil
	}
	d := dest{sink: rs}
	sent, sendDone := 0, false
	var got, total uint64
	recvStarted, recvDone, match := false, false, true
	for !sendDone || !recvDone {
		if !sendDone {
			if err := t.awaitSpace(ctx, pe, out); err != nil {
				return true, t.breakRing(out, err)
			}
			pos := out.pos
			var piece []byte
			if sent == 0 {
				h := msgHeader{kind: kindInline, length: uint64(len(p)), fp: *fp}
				k := out.putFirst(&h, p)
				piece = p[:k]
				if len(p) > inlineMax {
					piece = out.slot(pos)[:k]
				}
			} else {
				slot := out.slot(pos)
				k := copy(slot, p[sent:])
				(&msgHeader{}).encode(out.entry(pos))
				piece = slot[:k]
			}
			out.publish()
			if ps != nil {
				ps.Consume(sent, piece)
			}
			sent += len(piece)
			sendDone = sent == len(p)
		}
		if !recvDone {
			if err := t.awaitData(ctx, pe, in); err != nil {
				return true, t.breakRing(in, err)
			}
			if !recvStarted {
				recvStarted = true
				e := in.entry(in.pos)
				h, err := decodeHeader(e)
				if err != nil {
					return true, t.protocolError(pe, in, err)
				}
				match = h.fp == *fp && h.length == uint64(n)
				if !match {
					// The rest of the exchange is void: leave the stream
					// broken rather than skip the message slot by slot.
					t.breakRing(out, errStreamBroken)
					return true, t.breakRing(in, mismatch(pe.rank, fp, &h.fp, h.length, n))
				}
				total = h.length
				if h.kind == kindCMA {
					if err := t.recvCMA(ctx, pe, in, &h, rs.Staging()[:n], true); err != nil {
						return true, err
					}
					rs.Consume(0, rs.Staging()[:n])
					recvDone = true
					continue
				}
				first := in.firstLen(total)
				if total <= inlineMax {
					d.put(0, e[hdrSize:hdrSize+first])
				} else {
					d.put(0, in.slot(in.pos)[:first])
				}
				got = first
			} else {
				k := min(total-got, uint64(in.slotBytes))
				d.put(got, in.slot(in.pos)[:k])
				got += k
			}
			in.release()
			recvDone = got == total
		}
	}
	return true, nil
}
