package sched

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched/schedtest"
)

func TestOpString(t *testing.T) {
	in, out, scr := R(In, 3, 3), R(Out, 0, 3), R(Scratch, 6, 3)
	tests := []struct {
		op   Op
		want string
	}{
		{SendOp(2, in), "send ->2 in[3:+3]"},
		{RecvOp(0, out), "recv <-0 out[0:+3]"},
		{RecvReduceOp(0, in, out), "recv-reduce <-0 in[3:+3] out[0:+3]"},
		{RecvReduceSendOp(1, 2, in, scr), "recv-reduce-send <-1 ->2 in[3:+3] scratch[6:+3]"},
		{RecvCopySendOp(1, 2, out), "recv-copy-send <-1 ->2 out[0:+3]"},
		{CopyOp(in, out), "copy in[3:+3] out[0:+3]"},
		{ReduceOp(scr, out), "reduce scratch[6:+3] out[0:+3]"},
		{Op{Kind: 9, Peer: 1, To: 2, Src: R(Buf(7), 0, 1), Dst: out}, "kind(9) <-1 ->2 buf(7)[0:+1] out[0:+3]"},
	}
	for _, tc := range tests {
		if got := tc.op.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestProgramString(t *testing.T) {
	b := NewBuilder("ring", 1, 4).NeedScratch(2)
	b.Step(SendOp(2, R(In, 3, 3)), RecvReduceOp(0, R(In, 0, 3), R(Out, 0, 3)))
	b.Step(CopyOp(R(Out, 0, 2), R(Scratch, 0, 2)))
	want := "program ring rank 1/4 scratch 2\n" +
		"step 0: send ->2 in[3:+3] | recv-reduce <-0 in[0:+3] out[0:+3]\n" +
		"step 1: copy out[0:+2] scratch[0:+2]\n"
	if got := b.Program().String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	var sb strings.Builder
	if err := Fprint(&sb, b.Program()); err != nil || sb.String() != want {
		t.Errorf("Fprint = %q, %v", sb.String(), err)
	}
	odd := &Program{Algo: "two words", Steps: []Step{{}}}
	if got, want := odd.String(), "program \"two words\" rank 0/0 scratch 0\nstep 0:\n"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := (&Program{}).String(), "program \"\" rank 0/0 scratch 0\n"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := FormatAll([]*Program{nil, {Algo: "x", Size: 1}}), "program <nil>\n\nprogram x rank 0/1 scratch 0\n"; got != want {
		t.Errorf("FormatAll = %q, want %q", got, want)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestFprintError(t *testing.T) {
	if err := Fprint(failWriter{}, &Program{}); err == nil {
		t.Error("Fprint to a failing writer returned nil")
	}
}

// TestGolden pins the printed form of a few hand-built schedules; each is
// verified first. Run with -update to rewrite the files.
func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		gen  func(Spec, int, *Builder)
	}{
		{"ring-allreduce-n3", Uniform(AllReduce, 3, 7, 0, false), ringAllReduce},
		{"rd-allgather-n4", Spec{Coll: AllGather, N: 4, Counts: []int{2, 0, 1, 3}}, rdAllGather},
		{"chain-reduce-n4", Uniform(Reduce, 4, 5, 1, false), chainReduce},
		{"chain-broadcast-n3", Uniform(Broadcast, 3, 4, 2, false), chainBroadcast},
		{"dissemination-barrier-n5", Spec{Coll: Barrier, N: 5}, disseminationBarrier},
		{"pairwise-alltoall-n3", Spec{Coll: AllToAll, N: 3, Matrix: matrix(3, false)}, pairwiseAllToAll},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			progs := build(tc.spec, tc.gen)
			if err := Verify(tc.spec, progs); err != nil {
				t.Fatal(err)
			}
			schedtest.Golden(t, filepath.Join("testdata", tc.name+".golden"), FormatAll(progs))
		})
	}
}
