package sched

import "fmt"

// A concrete executor, independent of the verifier, used as an oracle: it
// runs programs on numbers, reducing by wrapping addition of random 64-bit
// values, so that a missing or doubled contribution changes the result with
// overwhelming probability.

// weight is the pseudo-random input value of element i of rank r's In.
func weight(r, i int) uint64 {
	x := uint64(r)<<32 ^ uint64(i) + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// runConcrete executes progs for s (which Verify has accepted statically)
// and returns an error if the run deadlocks, mismatches a message length, or
// ends with a wrong Out anywhere.
func runConcrete(s Spec, progs []*Program) error {
	n := s.N
	type rank struct {
		in, out, scratch []uint64
		step             int
		started          bool
		recvd, done      []bool
	}
	ranks := make([]*rank, n)
	for r := range ranks {
		in, out := s.Lens(r)
		rk := &rank{scratch: make([]uint64, progs[r].Scratch)}
		for i := range rk.scratch {
			rk.scratch[i] = weight(-1-r, i) // garbage
		}
		outBuf := make([]uint64, out)
		for i := range outBuf {
			outBuf[i] = weight(-1000-r, i) // garbage
			if s.Coll == Broadcast && r == s.Root {
				outBuf[i] = weight(r, i)
			}
		}
		inBuf := make([]uint64, in)
		for i := range inBuf {
			inBuf[i] = weight(r, i)
		}
		rk.in, rk.out = inBuf, outBuf
		if a := s.AliasOf(r); a.Aliased {
			if s.Coll == ReduceScatter || s.Coll == Scatter {
				rk.out = inBuf[a.OutOff : a.OutOff+out]
			} else {
				copy(outBuf[a.InOff:], inBuf)
				rk.in = outBuf[a.InOff : a.InOff+in]
			}
		}
		ranks[r] = rk
	}
	view := func(rk *rank, g Region) []uint64 {
		b := [...][]uint64{In: rk.in, Out: rk.out, Scratch: rk.scratch}[g.Buf]
		return b[g.Off : g.Off+g.Len]
	}
	for {
		progress, finished := false, true
		for r, rk := range ranks {
			p := progs[r]
			if rk.step == len(p.Steps) {
				continue
			}
			finished = false
			ops := p.Steps[rk.step].Ops
			if !rk.started {
				rk.started, progress = true, true
				rk.recvd, rk.done = make([]bool, len(ops)), make([]bool, len(ops))
				for i, op := range ops {
					switch op.Kind {
					case Copy:
						copy(view(rk, op.Dst), append([]uint64(nil), view(rk, op.Src)...))
						rk.done[i] = true
					case LocalReduce:
						d, sv := view(rk, op.Dst), view(rk, op.Src)
						for k := range d {
							d[k] += sv[k]
						}
						rk.done[i] = true
					}
				}
			}
			for j, op := range ops {
				from, ok := op.Receives()
				if !ok || rk.recvd[j] {
					continue
				}
				sk := ranks[from]
				if !sk.started || sk.step == len(progs[from].Steps) {
					continue
				}
				for i, sop := range progs[from].Steps[sk.step].Ops {
					to, ok := sop.Sends()
					ready := sop.Kind == Send || sk.recvd[i]
					if !ok || to != r || !ready || sk.done[i] {
						continue
					}
					src := sop.Src
					if sop.Kind != Send {
						src = sop.Dst
					}
					if src.Len != op.Dst.Len {
						return fmt.Errorf("length mismatch")
					}
					msg := view(sk, src)
					dst := view(rk, op.Dst)
					switch op.Kind {
					case Recv, RecvCopySend:
						copy(dst, msg)
					default:
						own := view(rk, op.Src)
						for k := range dst {
							dst[k] = own[k] + msg[k]
						}
					}
					sk.done[i] = true
					rk.recvd[j] = true
					rk.done[j] = op.Kind == Recv || op.Kind == RecvReduce
					progress = true
					break
				}
			}
			all := true
			for _, d := range rk.done {
				all = all && d
			}
			if all {
				rk.step++
				rk.started = false
				progress = true
			}
		}
		if finished {
			break
		}
		if !progress {
			return fmt.Errorf("deadlock")
		}
	}
	// Expected results.
	for r, rk := range ranks {
		for i, got := range rk.out {
			var want uint64
			switch s.Coll {
			case AllReduce, Reduce:
				for b := range n {
					want += weight(b, i)
				}
			case Broadcast:
				want = weight(s.Root, i)
			case AllGather, Gather:
				b := 0
				for i >= s.Displ(b+1) {
					b++
				}
				want = weight(b, i-s.Displ(b))
			case ReduceScatter:
				for b := range n {
					want += weight(b, s.Displ(r)+i)
				}
			case Scatter:
				want = weight(s.Root, s.Displ(r)+i)
			case AllToAll:
				src := 0
				for i >= s.RecvDispl(r, src+1) {
					src++
				}
				want = weight(src, s.SendDispl(src, r)+i-s.RecvDispl(r, src))
			}
			if got != want {
				return fmt.Errorf("rank %d out[%d] wrong", r, i)
			}
		}
	}
	return nil
}
