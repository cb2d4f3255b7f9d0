package sched

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// mutate applies one byte-directed change to progs: it moves a peer or a
// region, changes an op's kind or buffer, or drops, duplicates or swaps ops
// and steps.
func mutate(progs []*Program, m []byte) {
	p := progs[int(m[0])%len(progs)]
	if len(p.Steps) == 0 {
		p.Steps = append(p.Steps, Step{Ops: []Op{{Kind: Kind(m[1] % 9), Peer: int(m[2] % 8)}}})
		return
	}
	si := int(m[1]) % len(p.Steps)
	ops := p.Steps[si].Ops
	if len(ops) == 0 {
		p.Steps = slices.Delete(p.Steps, si, si+1)
		return
	}
	oi := int(m[2]) % len(ops)
	op := &ops[oi]
	delta := int(int8(m[3])) >> 4
	if delta == 0 {
		delta = 1
	}
	switch m[3] % 12 {
	case 0:
		op.Peer += delta
	case 1:
		op.To += delta
	case 2:
		op.Src.Off += delta
	case 3:
		op.Src.Len += delta
	case 4:
		op.Dst.Off += delta
	case 5:
		op.Dst.Len += delta
	case 6:
		op.Kind = Kind(uint8(m[3]>>4) % 9)
	case 7:
		op.Src.Buf = Buf(m[3] >> 4 % 4)
	case 8:
		op.Dst.Buf = Buf(m[3] >> 4 % 4)
	case 9:
		p.Steps[si].Ops = slices.Delete(ops, oi, oi+1)
	case 10:
		p.Steps = slices.Insert(p.Steps, si, Step{Ops: slices.Clone(ops)})
	case 11:
		sj := int(m[3]>>4) % len(p.Steps)
		p.Steps[si], p.Steps[sj] = p.Steps[sj], p.Steps[si]
	}
	p.Scratch += delta & int(m[0]>>7)
}

// checkMutated builds a schedule from algoList, applies mutations and
// checks Verify against the concrete executor: Verify never panics, always
// reports an *Error, accepts the unmutated correct schedules, accepts only
// schedules that compute the right result when run concretely, and does not
// report a deadlock, a length mismatch or a wrong result for a schedule whose
// concrete run succeeds. It returns Verify's error.
func checkMutated(t *testing.T, algo, n uint8, inPlace bool, muts []byte) error {
	tc := algoList[int(algo)%len(algoList)]
	s := tc.spec(tc.ns[int(n)%len(tc.ns)], inPlace)
	progs := build(s, tc.gen)
	for i := 0; i+4 <= len(muts) && i < 64; i += 4 {
		mutate(progs, muts[i:i+4])
	}
	_ = FormatAll(progs)
	err := Verify(s, progs)
	if err == nil {
		if cerr := runConcrete(s, progs); cerr != nil {
			t.Fatalf("Verify accepted a schedule whose concrete run fails: %v\n%s", cerr, FormatAll(progs))
		}
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Verify returned %T %v, want an *Error", err, err)
	}
	if e.Msg == "" {
		t.Fatalf("error without message: %+v", e)
	}
	if len(muts) < 4 && slices.Contains(tc.inPlace, inPlace) {
		t.Fatalf("%s n=%d inplace=%v: unmutated schedule rejected: %v", tc.name, s.N, inPlace, err)
	}
	switch e.Check {
	case CheckDeadlock, CheckLength, CheckResult:
		// Static checks passed, so the concrete executor can run it.
		if runConcrete(s, progs) == nil {
			t.Fatalf("Verify rejected a schedule whose concrete run succeeds: %v\n%s", err, FormatAll(progs))
		}
	}
	return err
}

// FuzzVerify runs checkMutated on fuzzed mutations.
func FuzzVerify(f *testing.F) {
	f.Add(uint8(0), uint8(3), false, []byte{})
	f.Add(uint8(0), uint8(4), true, []byte{1, 2, 1, 0x10})
	f.Add(uint8(6), uint8(5), true, []byte{2, 0, 0, 9, 1, 1, 0, 0x23})
	f.Add(uint8(7), uint8(9), false, []byte{3, 1, 1, 1, 4, 0, 0, 11})
	f.Add(uint8(9), uint8(4), false, []byte{0, 0, 0, 6, 1, 1, 1, 0xf5})
	f.Fuzz(func(t *testing.T, algo, n uint8, inPlace bool, muts []byte) {
		checkMutated(t, algo, n, inPlace, muts)
	})
}

// TestVerifyMutations runs checkMutated on random mutations of every test
// algorithm and logs how often each check fired.
func TestVerifyMutations(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	counts := map[string]int{}
	for i := range 4000 {
		muts := make([]byte, 4*(i%3))
		for k := range muts {
			muts[k] = byte(rng.Uint32())
		}
		err := checkMutated(t, uint8(rng.Uint32()), uint8(rng.Uint32()), rng.IntN(2) == 0, muts)
		var e *Error
		if errors.As(err, &e) {
			counts[e.Check.String()]++
		} else {
			counts["ok"]++
		}
	}
	t.Logf("outcomes: %v", counts)
}
