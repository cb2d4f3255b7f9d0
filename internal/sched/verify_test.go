package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// varCounts returns uneven counts for n ranks, some of them zero.
func varCounts(n int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = (i*7 + 3) % 5
	}
	return c
}

// matrix returns an AllToAll matrix for n ranks, symmetric if sym.
func matrix(n int, sym bool) [][]int {
	m := make([][]int, n)
	for s := range m {
		m[s] = make([]int, n)
		for d := range m[s] {
			if sym {
				m[s][d] = (s + d) % 3
			} else {
				m[s][d] = (s + 2*d) % 4
			}
		}
	}
	return m
}

type algoCase struct {
	name string
	spec func(n int, inPlace bool) Spec
	gen  func(s Spec, r int, b *Builder)
	ns   []int // rank counts to try
	// inPlace lists the in-place modes that are correct.
	inPlace []bool
}

var (
	both     = []bool{false, true}
	outOnly  = []bool{false}
	smallNs  = []int{1, 2, 3, 4, 5, 7, 8}
	pow2Ns   = []int{1, 2, 4, 8, 16}
	algoList = []algoCase{
		{"ring-allreduce", func(n int, ip bool) Spec { return Uniform(AllReduce, n, 2*n+1, 0, ip) }, ringAllReduce, smallNs, both},
		{"ring-allreduce-short", func(n int, ip bool) Spec { return Uniform(AllReduce, n, n/2, 0, ip) }, ringAllReduce, smallNs, both},
		{"rd-allgather", func(n int, ip bool) Spec { return Spec{Coll: AllGather, N: n, Counts: varCounts(n), InPlace: ip} }, rdAllGather, pow2Ns, both},
		{"rd-allgather-uniform", func(n int, ip bool) Spec { return Uniform(AllGather, n, 3, 0, ip) }, rdAllGather, pow2Ns, both},
		{"linear-broadcast", func(n int, ip bool) Spec { return Uniform(Broadcast, n, 5, n/2, ip) }, linearBroadcast, smallNs, outOnly},
		{"chain-broadcast", func(n int, ip bool) Spec { return Uniform(Broadcast, n, 4, n-1, ip) }, chainBroadcast, smallNs, outOnly},
		{"chain-reduce", func(n int, ip bool) Spec { return Uniform(Reduce, n, 3, n/3, ip) }, chainReduce, smallNs, both},
		{"dissemination-barrier", func(n int, ip bool) Spec { return Spec{Coll: Barrier, N: n} }, disseminationBarrier, append(smallNs, 9, 16, 17), outOnly},
		{"ring-reducescatter", func(n int, ip bool) Spec { return Spec{Coll: ReduceScatter, N: n, Counts: varCounts(n), InPlace: ip} }, ringReduceScatter, smallNs, both},
		{"pairwise-alltoall", func(n int, ip bool) Spec { return Spec{Coll: AllToAll, N: n, Matrix: matrix(n, ip), InPlace: ip} }, pairwiseAllToAll, smallNs, outOnly},
		{"linear-gather", func(n int, ip bool) Spec {
			return Spec{Coll: Gather, N: n, Root: n - 1, Counts: varCounts(n), InPlace: ip}
		}, linearGather, smallNs, both},
		{"linear-scatter", func(n int, ip bool) Spec {
			return Spec{Coll: Scatter, N: n, Root: n / 2, Counts: varCounts(n), InPlace: ip}
		}, linearScatter, smallNs, both},
	}
)

func TestVerifyAlgorithms(t *testing.T) {
	for _, tc := range algoList {
		for _, ip := range tc.inPlace {
			for _, n := range tc.ns {
				t.Run(fmt.Sprintf("%s/n=%d/inplace=%v", tc.name, n, ip), func(t *testing.T) {
					s := tc.spec(n, ip)
					if err := Verify(s, build(s, tc.gen)); err != nil {
						t.Fatalf("Verify: %v", err)
					}
				})
			}
		}
	}
}

// TestVerifyRingSweep verifies the ring AllReduce for every n in 1..64 with
// counts from n to 2n+3, in place and not.
func TestVerifyRingSweep(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for _, count := range []int{n, n + 1, 2*n + 3} {
			for _, ip := range both {
				s := Uniform(AllReduce, n, count, 0, ip)
				if err := Verify(s, build(s, ringAllReduce)); err != nil {
					t.Fatalf("n=%d count=%d inplace=%v: %v", n, count, ip, err)
				}
			}
		}
	}
}

// TestVerifyRandomLarge verifies a few large random rank counts.
func TestVerifyRandomLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	trials := 3
	if testing.Short() {
		trials = 1
	}
	for range trials {
		n := 65 + rng.IntN(1024-65)
		count := n + rng.IntN(n+4)
		for _, c := range []struct {
			s   Spec
			gen func(Spec, int, *Builder)
		}{
			{Uniform(AllReduce, n, count, 0, rng.IntN(2) == 0), ringAllReduce},
			{Spec{Coll: ReduceScatter, N: n, Counts: varCounts(n)}, ringReduceScatter},
			{Uniform(Broadcast, n, count, rng.IntN(n), false), chainBroadcast},
			{Spec{Coll: Barrier, N: n}, disseminationBarrier},
		} {
			start := time.Now()
			if err := Verify(c.s, build(c.s, c.gen)); err != nil {
				t.Fatalf("%v n=%d: %v", c.s.Coll, n, err)
			}
			t.Logf("%v n=%d total %d elements: %v", c.s.Coll, n, c.s.Total(), time.Since(start))
		}
	}
}

// TestVerifyRing1024 times the verification of a 1024-rank ring AllReduce.
func TestVerifyRing1024(t *testing.T) {
	for _, ip := range both {
		s := Uniform(AllReduce, 1024, 1031, 0, ip)
		progs := build(s, ringAllReduce)
		start := time.Now()
		if err := Verify(s, progs); err != nil {
			t.Fatal(err)
		}
		t.Logf("1024-rank ring AllReduce, 1031 elements, in place %v: verified in %v", ip, time.Since(start))
	}
}

// TestVerifyAllGather1024 times a 1024-rank AllGather of 1031 elements per
// rank (over a million elements per rank), which only a run-length
// representation handles in reasonable memory.
func TestVerifyAllGather1024(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	s := Uniform(AllGather, 1024, 1031, 0, true)
	progs := build(s, rdAllGather)
	start := time.Now()
	if err := Verify(s, progs); err != nil {
		t.Fatal(err)
	}
	t.Logf("1024-rank recursive-doubling AllGather, 1031 elements per rank: verified in %v", time.Since(start))
}

func BenchmarkVerifyRing1024(b *testing.B) {
	s := Uniform(AllReduce, 1024, 1031, 0, false)
	progs := build(s, ringAllReduce)
	b.ReportAllocs()
	for b.Loop() {
		if err := Verify(s, progs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyRing64(b *testing.B) {
	s := Uniform(AllReduce, 64, 131, 0, false)
	progs := build(s, ringAllReduce)
	b.ReportAllocs()
	for b.Loop() {
		if err := Verify(s, progs); err != nil {
			b.Fatal(err)
		}
	}
}

// progsOf builds programs from per-rank step lists.
func progsOf(n int, steps ...[]Step) []*Program {
	progs := make([]*Program, n)
	for r := range progs {
		progs[r] = &Program{Rank: r, Size: n, Algo: "test"}
		if r < len(steps) {
			progs[r].Steps = steps[r]
		}
	}
	return progs
}

// st is shorthand for a step.
func st(ops ...Op) Step { return Step{Ops: ops} }

// exchangeReduce is a correct 2-rank AllReduce of c elements: exchange In,
// reduce into Out. It is wrong in place, where Out is In.
func exchangeReduce(c int) []*Program {
	return progsOf(2,
		[]Step{st(SendOp(1, R(In, 0, c)), RecvReduceOp(1, R(In, 0, c), R(Out, 0, c)))},
		[]Step{st(SendOp(0, R(In, 0, c)), RecvReduceOp(0, R(In, 0, c), R(Out, 0, c)))},
	)
}

// relayReduce is a correct 2-rank AllReduce out of place: rank 1 first
// receives rank 0's input into Out, then sends its own In back. In place,
// that receive overwrites rank 1's input before it is sent.
func relayReduce(c int) []*Program {
	in, out := R(In, 0, c), R(Out, 0, c)
	return progsOf(2,
		[]Step{st(SendOp(1, in)), st(RecvReduceOp(1, in, out)), st(SendOp(1, out))},
		[]Step{st(RecvOp(0, out)), st(SendOp(0, in)), st(RecvOp(0, out))},
	)
}

func TestVerifyErrors(t *testing.T) {
	ar2 := Uniform(AllReduce, 2, 4, 0, false)
	ring3 := Uniform(AllReduce, 3, 6, 0, false)
	barrier2 := Spec{Coll: Barrier, N: 2}
	empty, none := R(In, 0, 0), R(Out, 0, 0) // empty messages: sent from, received into
	tests := []struct {
		name  string
		spec  Spec
		progs []*Program
		check Check
		rank  int // -1: not checked
		step  int
		op    int
		msg   []string // substrings of the message
	}{
		{
			name: "bad spec", spec: Spec{Coll: AllReduce, N: 0}, progs: nil,
			check: CheckSpec, rank: -1, step: -1, op: -1, msg: []string{"0 ranks"},
		},
		{
			name: "program count", spec: ar2, progs: progsOf(3),
			check: CheckSpec, rank: -1, step: -1, op: -1, msg: []string{"3 programs for 2 ranks"},
		},
		{
			name: "nil program", spec: ar2, progs: []*Program{{Rank: 0, Size: 2}, nil},
			check: CheckSpec, rank: 1, step: -1, op: -1, msg: []string{"nil program"},
		},
		{
			name: "wrong rank", spec: ar2, progs: []*Program{{Rank: 0, Size: 2}, {Rank: 0, Size: 2}},
			check: CheckSpec, rank: 1, step: -1, op: -1, msg: []string{"says rank 0"},
		},
		{
			name: "wrong size", spec: ar2, progs: []*Program{{Rank: 0, Size: 2}, {Rank: 1, Size: 3}},
			check: CheckSpec, rank: 1, step: -1, op: -1, msg: []string{"3 ranks"},
		},
		{
			name: "unknown kind", spec: ar2, progs: progsOf(2, nil, []Step{st(Op{Kind: 42})}),
			check: CheckOp, rank: 1, step: 0, op: 0, msg: []string{"kind(42)", "unknown op kind"},
		},
		{
			name: "peer out of range", spec: ar2, progs: progsOf(2, []Step{st(RecvOp(0, empty)), st(SendOp(2, empty))}),
			check: CheckOp, rank: 0, step: 0, op: 0, msg: []string{"receives from the rank itself"},
		},
		{
			name: "forward out of range", spec: Uniform(Broadcast, 2, 1, 0, false),
			progs: progsOf(2, nil, []Step{st(RecvCopySendOp(0, -1, R(Out, 0, 1)))}),
			check: CheckOp, rank: 1, step: 0, op: 0, msg: []string{"sends to rank -1 outside [0,2)"},
		},
		{
			name: "out of bounds", spec: ar2, progs: progsOf(2, nil, []Step{st(), st(CopyOp(R(In, 0, 2), R(Out, 3, 2)))}),
			check: CheckOp, rank: 1, step: 1, op: 0, msg: []string{"out[3:+2] outside out, which has 4 elements"},
		},
		{
			name: "scratch out of bounds", spec: ar2, progs: progsOf(2, []Step{st(CopyOp(R(In, 0, 1), R(Scratch, 0, 1)))}),
			check: CheckOp, rank: 0, step: 0, op: 0, msg: []string{"scratch[0:+1] outside scratch, which has 0 elements"},
		},
		{
			name: "negative offset", spec: ar2, progs: progsOf(2, []Step{st(SendOp(1, R(In, -1, 1)))}),
			check: CheckOp, rank: 0, step: 0, op: 0, msg: []string{"in[-1:+1] outside"},
		},
		{
			name: "unequal lengths", spec: ar2, progs: progsOf(2, []Step{st(CopyOp(R(In, 0, 2), R(Out, 0, 3)))}),
			check: CheckOp, rank: 0, step: 0, op: 0, msg: []string{"different lengths 2 and 3"},
		},
		{
			name: "writes in", spec: ar2, progs: progsOf(2, nil, []Step{st(RecvOp(0, R(In, 0, 4)))}),
			check: CheckOp, rank: 1, step: 0, op: 0, msg: []string{"writes in"},
		},
		{
			name: "reduce in allgather", spec: Uniform(AllGather, 2, 2, 0, false),
			progs: progsOf(2, nil, []Step{st(ReduceOp(R(In, 0, 2), R(Out, 0, 2)))}),
			check: CheckOp, rank: 1, step: 0, op: 0, msg: []string{"AllGather does not reduce"},
		},
		{
			name: "two sends to one peer", spec: ar2,
			progs: progsOf(2, []Step{st(SendOp(1, R(In, 0, 2)), SendOp(1, R(In, 2, 2)))}),
			check: CheckOp, rank: 0, step: 0, op: 1, msg: []string{"sends to rank 1, as op 0"},
		},
		{
			name: "conflicting writes", spec: ar2,
			progs: progsOf(2, []Step{st(CopyOp(R(In, 0, 2), R(Out, 0, 2)), RecvOp(1, R(Out, 1, 3)))}),
			check: CheckConflict, rank: 0, step: 0, op: 1, msg: []string{"writes out[1:+3], overlapping out[0:+2] written by op 0"},
		},
		{
			name: "read of a written region", spec: ar2,
			progs: progsOf(2, nil, []Step{st(), st(RecvOp(0, R(Out, 0, 2)), SendOp(0, R(Out, 1, 2)))}),
			check: CheckConflict, rank: 1, step: 1, op: 0, msg: []string{"overlapping out[1:+2] read by op 1"},
		},
		{
			name: "copy overlap", spec: ar2, progs: progsOf(2, []Step{st(CopyOp(R(Out, 0, 2), R(Out, 1, 2)))}),
			check: CheckConflict, rank: 0, step: 0, op: 0, msg: []string{"out[0:+2] and out[1:+2] overlap"},
		},
		{
			name: "reduce with itself", spec: ar2, progs: progsOf(2, []Step{st(ReduceOp(R(Out, 0, 2), R(Out, 0, 2)))}),
			check: CheckConflict, rank: 0, step: 0, op: 0, msg: []string{"reduces out[0:+2] with itself"},
		},
		{
			name: "in-place conflict", spec: Uniform(AllReduce, 2, 4, 0, true), progs: exchangeReduce(4),
			check: CheckConflict, rank: 0, step: 0, op: 1, msg: []string{"in and out share storage"},
		},
		{
			name: "deadlock", spec: barrier2,
			progs: progsOf(2,
				[]Step{st(SendOp(1, empty)), st(RecvOp(1, none))},
				[]Step{st(SendOp(0, empty)), st(RecvOp(0, none))}),
			check: CheckDeadlock, rank: 0, step: 0, op: 0,
			msg: []string{"2 of 2 ranks cannot progress", "rank 0 step 0: op 0 (send ->1 in[0:+0]) waits to send message #1 on 0→1, but rank 1, at step 0, has no receive from 0 pending",
				"rank 1 step 0: op 0 (send ->0 in[0:+0]) waits to send message #1 on 1→0"},
		},
		{
			name: "send never received", spec: barrier2,
			progs: progsOf(2,
				[]Step{st(SendOp(1, empty)), st(SendOp(1, empty))},
				[]Step{st(RecvOp(0, none))}),
			check: CheckDeadlock, rank: 0, step: 1, op: 0,
			msg: []string{"1 of 2 ranks", "waits to send message #2 on 0→1, but rank 1 has finished after receiving 1"},
		},
		{
			name: "receive never sent", spec: barrier2,
			progs: progsOf(2, nil, []Step{st(RecvOp(0, none))}),
			check: CheckDeadlock, rank: 1, step: 0, op: 0,
			msg: []string{"waits to receive message #1 on 0→1, but rank 0 has finished after sending 0"},
		},
		{
			name: "stuck forward", spec: Uniform(Broadcast, 3, 1, 0, false),
			progs: progsOf(3,
				[]Step{st(RecvOp(1, R(Out, 0, 1)))},
				[]Step{st(RecvCopySendOp(2, 0, R(Out, 0, 1)))},
				[]Step{st(RecvOp(0, R(Out, 0, 1)))}),
			check: CheckDeadlock, rank: 0, step: 0, op: 0,
			msg: []string{"3 of 3 ranks", "rank 0 step 0: op 0 (recv <-1 out[0:+1]) waits to receive message #1 on 1→0, which rank 1 (step 0 op 0) forwards only after its own receive from 2",
				"rank 2 step 0: op 0 (recv <-0 out[0:+1]) waits to receive message #1 on 0→2, but rank 0, at step 0, has no send to 2 pending"},
		},
		{
			name: "length mismatch", spec: ar2,
			progs: progsOf(2,
				[]Step{st(SendOp(1, R(In, 0, 4)))},
				[]Step{st(RecvOp(0, R(Out, 0, 3)))}),
			check: CheckLength, rank: 1, step: 0, op: 0, msg: []string{"receives 4 elements into 3 from rank 0 step 0 op 0"},
		},
		{
			name: "double contribution", spec: ar2,
			progs: func() []*Program {
				p := exchangeReduce(4)
				p[0].Steps = append(p[0].Steps, st(SendOp(1, R(Out, 0, 4))))
				p[1].Steps = append(p[1].Steps, st(RecvReduceOp(0, R(Out, 0, 4), R(Out, 0, 4))))
				return p
			}(),
			check: CheckReduce, rank: 1, step: 1, op: 0,
			msg: []string{"element out[0] would combine ranks {0-1} twice: out[0] = (0, {0-1}) with the message from rank 0 = (0, {0-1})"},
		},
		{
			name: "reduce of undefined", spec: ar2,
			progs: progsOf(2, []Step{st(RecvReduceOp(1, R(Out, 0, 4), R(Out, 0, 4)))}, []Step{st(SendOp(0, R(In, 0, 4)))}),
			check: CheckReduce, rank: 0, step: 0, op: 0, msg: []string{"element out[0] would combine an undefined value: out[0] = undefined"},
		},
		{
			name: "reduce of different elements", spec: ar2,
			progs: progsOf(2, []Step{st(SendOp(1, R(In, 0, 2)))}, []Step{st(RecvReduceOp(0, R(In, 2, 2), R(Out, 2, 2)))}),
			check: CheckReduce, rank: 1, step: 0, op: 0,
			msg: []string{"element out[2] would combine values of different elements: in[2] = (2, {1}) with the message from rank 0 = (0, {0})"},
		},
		{
			name: "local reduce twice", spec: ar2,
			progs: progsOf(2, []Step{st(CopyOp(R(In, 0, 4), R(Out, 0, 4))), st(ReduceOp(R(In, 0, 4), R(Out, 0, 4)))}),
			check: CheckReduce, rank: 0, step: 1, op: 0, msg: []string{"ranks {0} twice: out[0] = (0, {0}) with in[0] = (0, {0})"},
		},
		{
			name: "missing contribution", spec: ring3,
			progs: func() []*Program {
				p := build(ring3, ringAllReduce)
				op := &p[2].Steps[0].Ops[1]
				*op = RecvOp(op.Peer, op.Dst) // rank 2 drops its own block 1
				return p
			}(),
			check: CheckResult, rank: 0, step: -1, op: -1, msg: []string{"ends with out[2] = (2, {0-1}), want (2, {0-2})"},
		},
		{
			name: "undefined result", spec: Uniform(Broadcast, 3, 2, 1, false),
			progs: progsOf(3, nil, []Step{st(SendOp(2, R(Out, 0, 2)))}, []Step{st(RecvOp(1, R(Out, 0, 2)))}),
			check: CheckResult, rank: 0, step: -1, op: -1, msg: []string{"ends with out[0] = undefined, want (0, {1})"},
		},
		{
			name: "barrier without hearing from everybody", spec: Spec{Coll: Barrier, N: 3},
			progs: progsOf(3,
				[]Step{st(SendOp(1, empty), RecvOp(2, none))},
				[]Step{st(SendOp(2, empty), RecvOp(0, none))},
				[]Step{st(SendOp(0, empty), RecvOp(1, none))}),
			check: CheckCausality, rank: 0, step: -1, op: -1, msg: []string{"without hearing from ranks {1}"},
		},
		{
			name: "in-place overwrite before send", spec: Uniform(AllReduce, 2, 3, 0, true), progs: relayReduce(3),
			check: CheckReduce, rank: 0, step: 1, op: 0, msg: []string{"ranks {0} twice"},
		},
		{
			name: "in-place alltoall", spec: Spec{Coll: AllToAll, N: 3, Matrix: matrix(3, true), InPlace: true},
			progs: build(Spec{Coll: AllToAll, N: 3, Matrix: matrix(3, true), InPlace: true}, pairwiseAllToAll),
			check: CheckResult, rank: 0, step: -1, op: -1, msg: []string{"ends with out["},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.spec, tc.progs)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Verify = %v, want an *Error", err)
			}
			t.Log(err)
			if e.Check != tc.check || e.Rank != tc.rank || e.Step != tc.step || e.Op != tc.op {
				t.Errorf("got check %v rank %d step %d op %d, want %v rank %d step %d op %d",
					e.Check, e.Rank, e.Step, e.Op, tc.check, tc.rank, tc.step, tc.op)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

// TestAliasingHazardsOutOfPlace checks that the programs the in-place
// hazard cases reject are correct out of place.
func TestAliasingHazardsOutOfPlace(t *testing.T) {
	for name, c := range map[string]struct {
		s     Spec
		progs []*Program
	}{
		"exchange-reduce": {Uniform(AllReduce, 2, 4, 0, false), exchangeReduce(4)},
		"relay-reduce":    {Uniform(AllReduce, 2, 3, 0, false), relayReduce(3)},
	} {
		if err := Verify(c.s, c.progs); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{Check: CheckSpec, Rank: -1, Step: -1, Op: -1, Msg: "m"}, "sched: spec: m"},
		{Error{Check: CheckSpec, Rank: 2, Step: -1, Op: -1, Msg: "m"}, "sched: spec: rank 2: m"},
		{Error{Check: CheckOp, Rank: 2, Step: 3, Op: 4, Msg: "m"}, "sched: op: rank 2 step 3 op 4: m"},
		{Error{Check: Check(99), Rank: 2, Step: 3, Op: -1, Msg: "m"}, "sched: check(99): rank 2 step 3: m"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestVerifyDoesNotModify checks that Verify leaves its inputs alone.
func TestVerifyDoesNotModify(t *testing.T) {
	s := Uniform(AllReduce, 4, 9, 0, true)
	progs := build(s, ringAllReduce)
	before := FormatAll(progs)
	if err := Verify(s, progs); err != nil {
		t.Fatal(err)
	}
	if after := FormatAll(progs); after != before {
		t.Errorf("programs changed:\n%s\nbecame\n%s", before, after)
	}
}
