package sim

import (
	"errors"
	"fmt"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/exec"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// cop is one op of a compiled program: what the simulator needs of a
// sched.Op (its kind, peers and length in bytes), without the regions.
type cop struct {
	bytes    int64
	peer, to int32
	kind     sched.Kind
	fl       uint8 // the executor's fusions this op may take part in (flX, flRide, flCarry)
}

// Fusion flags of a compiled op: where the executor fuses large messages
// over a transport that can (internal/exec; the simulator applies them
// when the peer shares the rank's host, over shared memory).
const (
	// flX marks the ops of the first step of a sched.PairExchange whose
	// larger message is at least exec.ExchangeMin: that step and the
	// next run as one fused exchange.
	flX uint8 = 1 << iota
	// flRide marks a step's Copy of at least exec.CopySendMin bytes whose
	// source the step also sends (the Send marked flCarry): the copy is
	// done from the transport's copy of each piece of the send.
	flRide
	flCarry
)

func (o *cop) local() bool { return o.kind == sched.Copy || o.kind == sched.LocalReduce }

// programs holds compiled programs back to back: program p's steps are
// stepOff[progStep[p]:progStep[p+1]], step s's ops ops[stepOff[s]:stepOff[s+1]].
type programs struct {
	ops      []cop
	stepOff  []int32 // one per step, plus the end of the last
	progStep []int32 // one per program, plus the end
}

func newPrograms() *programs { return &programs{stepOff: []int32{0}, progStep: []int32{0}} }

// add compiles p with elements of es bytes.
func (ps *programs) add(p *sched.Program, es int) error { return ps.addRepeat(p, es, 1) }

// addRepeat compiles p run reps times back to back as one program.
func (ps *programs) addRepeat(p *sched.Program, es, reps int) error {
	for range reps {
		if err := ps.addSteps(p, es); err != nil {
			return err
		}
	}
	ps.progStep = append(ps.progStep, int32(len(ps.stepOff)-1))
	return nil
}

func (ps *programs) addSteps(p *sched.Program, es int) error {
	for si, st := range p.Steps {
		first := len(ps.ops)
		for _, o := range st.Ops {
			ps.ops = append(ps.ops, cop{bytes: int64(o.Len()) * int64(es), peer: int32(o.Peer), to: int32(o.To), kind: o.Kind})
		}
		fuses(p, si, es, ps.ops[first:])
		if len(ps.ops) > maxOps {
			return fmt.Errorf("%w: programs of more than %d ops", ErrTooLarge, maxOps)
		}
		ps.stepOff = append(ps.stepOff, int32(len(ps.ops)))
	}
	return nil
}

// fuses sets the fusion flags of ops, step si of p compiled, as the
// executor decides them (exec.Run: a fused exchange first, else a copy
// riding a send).
func fuses(p *sched.Program, si, es int, ops []cop) {
	if _, ok := sched.PairExchange(p, si); ok {
		a, d := 0, 0
		for _, o := range p.Steps[si].Ops {
			if o.Kind == sched.Send {
				a = o.Len()
			} else {
				d = o.Len()
			}
		}
		if max(a, d)*es >= exec.ExchangeMin {
			for i := range ops {
				ops[i].fl |= flX
			}
			return
		}
	}
	st := p.Steps[si].Ops
	for i := range st {
		if st[i].Kind != sched.Copy || st[i].Src.Len*es < exec.CopySendMin || st[i].Src == st[i].Dst {
			continue
		}
		for j := range st {
			if st[j].Kind == sched.Send && st[j].Src == st[i].Src {
				ops[i].fl |= flRide
				ops[j].fl |= flCarry
				return
			}
		}
	}
}

func (ps *programs) steps(p int) (lo, hi int32) { return ps.progStep[p], ps.progStep[p+1] }

func (ps *programs) step(s int32) []cop { return ps.ops[ps.stepOff[s]:ps.stepOff[s+1]] }

func (ps *programs) bytes() int64 {
	return int64(len(ps.ops))*24 + int64(len(ps.stepOff)+len(ps.progStep))*4
}

// maxOps bounds the ops the simulator keeps (24 bytes each).
const maxOps = 40 << 20

// ErrTooLarge is returned for a run beyond the simulator's bounds.
var ErrTooLarge = errors.New("sim: too large to simulate")

// build returns rank's program of a for s.
func build(a algo.Algorithm, s sched.Spec, rank int) (*sched.Program, error) {
	p, err := a.Build(s, rank)
	if err != nil {
		return nil, fmt.Errorf("sim: %s %s rank %d: %w", s.Coll, a.Name, rank, err)
	}
	return p, nil
}

// shifted reports whether compiled program q is compiled program p with
// every peer moved by d ranks (mod n; with xor, every peer XORed with d)
// and the same kinds and lengths, a length allowed to differ by one
// element of es bytes (the blocks of a count not divisible by n).
func shifted(p, q *programs, d, n int, es int64, xor bool) bool {
	if len(p.stepOff) != len(q.stepOff) || len(p.ops) != len(q.ops) {
		return false
	}
	for i := range p.stepOff {
		if p.stepOff[i] != q.stepOff[i] {
			return false
		}
	}
	mv := func(r int32) int32 { return int32((int(r) + d) % n) }
	if xor {
		mv = func(r int32) int32 { return r ^ int32(d) }
	}
	for i := range p.ops {
		x, y := &p.ops[i], &q.ops[i]
		if x.kind != y.kind || x.fl != y.fl || x.bytes-y.bytes > es || y.bytes-x.bytes > es {
			return false
		}
		if !x.local() && mv(x.peer) != y.peer {
			return false
		}
		if (x.kind == sched.RecvReduceSend || x.kind == sched.RecvCopySend) && mv(x.to) != y.to {
			return false
		}
	}
	return true
}

// period returns the smallest power of two P dividing n (or n) such that
// rank r+P's program is rank r's shifted by P (xor false) or, n a power of
// two, such that rank r⊕d's program is rank r's with every peer XORed with
// d for every multiple d of P (xor true: recursive doubling and halving,
// whose partners are r⊕2^k, have P = 1 this way and P = n/2 by shifts).
// Both are checked on sample ranks: the first two periods, the middle and
// the wrap-around at the end, and for XOR every power of two from P up.
// The samples are kept compiled (24 bytes an op).
func period(a algo.Algorithm, s sched.Spec, es int) (P int, xor bool, err error) {
	n := s.N
	cache := map[int]*programs{}
	get := func(r int) (*programs, error) {
		r %= n
		if p, ok := cache[r]; ok {
			return p, nil
		}
		p, err := build(a, s, r)
		if err != nil {
			return nil, err
		}
		c := newPrograms()
		if err := c.add(p, es); err != nil {
			return nil, err
		}
		cache[r] = c
		return c, nil
	}
	same := func(r, d int, xor bool) (bool, error) {
		q := r + d
		if xor {
			q = r ^ d
		}
		if r < 0 || r >= n || q < 0 || q >= n {
			return true, nil
		}
		x, err := get(r)
		if err != nil {
			return false, err
		}
		y, err := get(q)
		if err != nil {
			return false, err
		}
		return shifted(x, y, d, n, int64(es), xor), nil
	}
	pow2 := n&(n-1) == 0
	for P := 1; P < n; P *= 2 {
		if n%P != 0 {
			break
		}
		samples := []int{0, 1, P - 1, P, 2*P - 1, n/2 - 1, n / 2, n - 2*P, n - P - 1, n - P, n - 1}
		ok := true
		for _, r := range samples {
			if ok, err = same(r, P, false); err != nil || !ok {
				break
			}
		}
		if err != nil {
			return 0, false, err
		}
		if ok {
			return P, false, nil
		}
		if !pow2 {
			continue
		}
		ok = true
		for d := P; d < n && ok; d *= 2 {
			for _, r := range samples {
				if ok, err = same(r, d, true); err != nil || !ok {
					break
				}
			}
		}
		if err != nil {
			return 0, false, err
		}
		if ok {
			return P, true, nil
		}
	}
	return n, false, nil
}
