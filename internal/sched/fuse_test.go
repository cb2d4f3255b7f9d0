package sched

import (
	"errors"
	"testing"
)

// TestPairExchange: the two-rank ring AllReduce is one PairExchange per
// rank (in place and not, even and odd counts); longer rings and other
// shapes are not.
func TestPairExchange(t *testing.T) {
	for _, count := range []int{1, 2, 7, 1000} {
		for _, inPlace := range []bool{false, true} {
			s := Uniform(AllReduce, 2, count, 0, inPlace)
			progs := build(s, ringAllReduce)
			if err := Verify(s, progs); err != nil {
				t.Fatalf("count %d: %v", count, err)
			}
			for r, p := range progs {
				if q, ok := PairExchange(p, 0); !ok || q != 1-r {
					t.Errorf("count %d in place %v rank %d: PairExchange = %d, %v", count, inPlace, r, q, ok)
				}
				if _, ok := PairExchange(p, 1); ok {
					t.Errorf("rank %d: PairExchange at the last step", r)
				}
			}
		}
	}
	s := Uniform(AllReduce, 3, 9, 0, false)
	for r, p := range build(s, ringAllReduce) {
		for si := range p.Steps {
			if _, ok := PairExchange(p, si); ok {
				t.Errorf("3-rank ring, rank %d step %d: PairExchange", r, si)
			}
		}
	}
}

// TestCheckFusion: a correct program whose rank 1 runs the exchange's
// first step as two steps (so it would not fuse) fails CheckFusion: rank
// 0 would interleave pieces its peer reads whole.
func TestCheckFusion(t *testing.T) {
	s := Uniform(AllReduce, 2, 10, 0, false)
	progs := build(s, ringAllReduce)
	p1 := progs[1]
	split := &Program{Rank: 1, Size: 2, Algo: p1.Algo}
	split.Steps = append(split.Steps, Step{Ops: p1.Steps[0].Ops[:1]}, Step{Ops: p1.Steps[0].Ops[1:]})
	split.Steps = append(split.Steps, p1.Steps[1:]...)
	progs[1] = split
	err := Verify(s, progs)
	var e *Error
	if !errors.As(err, &e) || e.Check != CheckFusion || e.Rank != 0 {
		t.Fatalf("Verify = %v, want a fusion error at rank 0", err)
	}
}
