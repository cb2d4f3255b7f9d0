package argcheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
)

const f32, sum = int(reduce.Float32), int(reduce.Sum)

func TestCheck(t *testing.T) {
	buf := make([]byte, 4*12)
	b := func(i, j int) []byte { return buf[4*i : 4*j] }
	tests := []struct {
		name string
		a    Args
		want string // error text; "" for a valid call
		ok   func(k *Call) bool
	}{
		{"allreduce", Args{Coll: sched.AllReduce, Send: b(0, 3), Recv: b(3, 6), DT: f32, Op: sum}, "",
			func(k *Call) bool { return k.Count == 3 && !k.InPlace && len(k.Avg) == 12 && k.Digest == 3 }},
		{"allreduce in place", Args{Coll: sched.AllReduce, Send: b(0, 3), Recv: b(0, 3), DT: f32, Op: sum}, "",
			func(k *Call) bool { return k.InPlace }},
		{"allreduce lengths", Args{Coll: sched.AllReduce, Send: b(0, 3), Recv: b(3, 5), DT: f32, Op: sum}, "len(recv) = 2 elements, want len(send) = 3", nil},
		{"allreduce op", Args{Coll: sched.AllReduce, Send: b(0, 3), Recv: b(3, 6), DT: f32, Op: 42}, "unknown reduction op Op(42)", nil},
		{"partial overlap", Args{Coll: sched.AllReduce, Send: b(0, 4), Recv: b(2, 6), DT: f32, Op: sum}, "overlap", nil},
		{"dtype", Args{Coll: sched.AllReduce, DT: 300}, "unknown dtype DType(300)", nil},
		{"element size", Args{Coll: sched.AllReduce, Send: buf[:6], Recv: buf[8:14], DT: f32, Op: sum}, "multiple of the element size 4", nil},
		{"reduce root", Args{Coll: sched.Reduce, Send: b(0, 3), DT: f32, Op: sum, Root: 3}, "root 3 outside [0, 3)", nil},
		{"reduce off root", Args{Coll: sched.Reduce, Send: b(0, 3), DT: f32, Op: sum, Root: 0}, "",
			func(k *Call) bool { return k.Out == nil && k.Root == 0 }},
		{"broadcast", Args{Coll: sched.Broadcast, Recv: b(0, 5), DT: f32, Root: 2}, "",
			func(k *Call) bool { return k.Count == 5 && len(k.Out) == 20 && k.Avg == nil }},
		{"allgather in place", Args{Coll: sched.AllGather, Send: b(1, 2), Recv: b(0, 3), DT: f32}, "",
			func(k *Call) bool { return k.InPlace && k.Count == 1 }},
		{"allgather lengths", Args{Coll: sched.AllGather, Send: b(0, 2), Recv: b(2, 7), DT: f32}, "want Size() × len(send) = 6", nil},
		{"allgatherv", Args{Coll: sched.AllGather, V: true, Send: b(0, 2), Recv: b(2, 6), Counts: []int{1, 2, 1}, DT: f32}, "",
			func(k *Call) bool { return k.Spec != nil && k.Digest == DigestCounts([]int{1, 2, 1}) }},
		{"allgatherv negative", Args{Coll: sched.AllGather, V: true, Counts: []int{1, 1, -1}, DT: f32}, "counts[2] = -1 is negative", nil},
		{"allgatherv overflow", Args{Coll: sched.AllGather, V: true, Counts: []int{MaxElems, 1, 0}, DT: f32}, "sum(counts) overflows", nil},
		{"alltoall divisible", Args{Coll: sched.AllToAll, Send: b(0, 4), Recv: b(4, 8), DT: f32}, "not a multiple of Size() = 3", nil},
		{"alltoallv self", Args{Coll: sched.AllToAll, V: true, Send: b(0, 3), Recv: b(3, 7), Counts: []int{1, 1, 1}, RecvCounts: []int{1, 2, 1}, DT: f32}, "block to itself", nil},
		{"alltoallv", Args{Coll: sched.AllToAll, V: true, Send: b(0, 3), Recv: b(3, 7), Counts: []int{1, 1, 1}, RecvCounts: []int{2, 1, 1}, DT: f32}, "",
			func(k *Call) bool { return k.Digest == -1 && k.Spec.Matrix[0][1] == 2 && k.Spec.Matrix[1][2] == 1 }},
		{"scatter send at root", Args{Coll: sched.Scatter, Send: b(0, 2), Recv: b(2, 4), DT: f32, Root: 1}, "len(send) = 2 elements at the root", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var k Call
			err := Check(&tt.a, 1, 3, &k)
			if tt.want != "" {
				if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want ErrInvalidArgument mentioning %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.ok(&k) {
				t.Fatalf("call = %+v", k)
			}
		})
	}
}

func TestCheckP2P(t *testing.T) {
	for _, tt := range []struct {
		peer, tag, dt int
		want          string
	}{
		{0, 0, f32, ""}, {1, 0, f32, "peer 1"}, {3, 0, f32, "peer 3"}, {-1, 0, f32, "peer -1"},
		{0, -2, f32, "tag -2"}, {0, 1 << 31, f32, "tag"}, {0, 0, -1, "unknown dtype DType(-1)"},
	} {
		d, n, err := CheckP2P(make([]byte, 8), tt.dt, tt.peer, tt.tag, 1, 3)
		if tt.want == "" {
			if err != nil || d != reduce.Float32 || n != 2 {
				t.Errorf("%+v: %v %v %v", tt, d, n, err)
			}
		} else if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt, err, tt.want)
		}
	}
}

func TestName(t *testing.T) {
	for a, want := range map[*Args]string{
		{Coll: sched.SendRecv}:                 "Send",
		{Coll: sched.SendRecv, RecvSide: true}: "Recv",
		{Coll: sched.AllToAll, V: true}:        "AllToAllV",
		{Coll: sched.ReduceScatter}:            "ReduceScatter",
	} {
		if got := a.Name(); got != want {
			t.Errorf("%+v: %q, want %q", *a, got, want)
		}
	}
}

// The check of a uniform call is on every collective's path: it must not
// allocate.
func TestCheckAllocs(t *testing.T) {
	send, recv := make([]byte, 64), make([]byte, 64)
	a := Args{Coll: sched.AllReduce, Send: send, Recv: recv, DT: f32, Op: sum}
	var k Call
	if n := testing.AllocsPerRun(100, func() {
		if err := Check(&a, 0, 2, &k); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per check, want 0", n)
	}
}

func BenchmarkCheck(b *testing.B) {
	send, recv := make([]byte, 8), make([]byte, 8)
	a := Args{Coll: sched.AllReduce, Send: send, Recv: recv, DT: f32, Op: sum}
	var k Call
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(&a, 0, 2, &k); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBuf(t *testing.T) {
	send, recv := []byte{1}, []byte{2, 3}
	if b := (&Args{Coll: sched.SendRecv, Send: send, Recv: recv}).Buf(); len(b) != 1 {
		t.Errorf("Send's Buf = %v, want its send buffer", b)
	}
	if b := (&Args{Coll: sched.SendRecv, RecvSide: true, Send: send, Recv: recv}).Buf(); len(b) != 2 {
		t.Errorf("Recv's Buf = %v, want its receive buffer", b)
	}
}

// TestMemo: Memo.Check answers every call as Check does, whether the call
// repeats the last one's shape or not: the same error or the same Call,
// over calls of every uniform collective whose buffers move, overlap, or
// lie in place from call to call, at changing ranks and roots.
func TestMemo(t *testing.T) {
	buf := make([]byte, 4*16)
	colls := []sched.Coll{sched.AllReduce, sched.Reduce, sched.Broadcast, sched.AllGather,
		sched.ReduceScatter, sched.AllToAll, sched.Gather, sched.Scatter}
	var m Memo
	hits := 0
	seed := uint32(1)
	next := func(n int) int { // a fixed sequence, so a failure repeats
		seed = seed*1664525 + 1013904223
		return int(seed>>8) % n
	}
	// The memo's key must hold the type and the op: f64 halves the
	// count (or refuses an odd length), max reduces differently.
	dts := []int{f32, int(reduce.Int32), int(reduce.Float64)}
	ops := []int{sum, int(reduce.Max)}
	var coll sched.Coll
	var n, root, rank, dt, op int
	for i := range 20000 {
		if i == 0 || next(2) == 0 { // a new shape; else the last one's, its buffers elsewhere
			coll, n, root, rank = colls[next(len(colls))], 1+next(3), next(3), next(3)
			dt, op = dts[next(len(dts))], ops[next(len(ops))]
		}
		send, recv := n, n
		switch coll {
		case sched.AllGather, sched.Gather:
			recv = 3 * n
		case sched.ReduceScatter, sched.Scatter:
			send = 3 * n
		case sched.AllToAll:
			send, recv = 3*n, 3*n
		}
		so, ro := next(16-send+1), next(16-recv+1)
		a := Args{Coll: coll, Send: buf[4*so : 4*(so+send)], Recv: buf[4*ro : 4*(ro+recv)], DT: dt, Root: root}
		if coll.Reduces() {
			a.Op = op
		}
		if next(16) == 0 {
			a.Recv = a.Recv[:len(a.Recv)-4] // a wrong length now and then
		}
		var want, got Call
		werr := Check(&a, rank, 3, &want)
		hit := m.ok && m.coll == a.Coll && m.dt == a.DT && m.op == a.Op && m.root == a.Root && m.send == len(a.Send) && m.recv == len(a.Recv) && m.rank == rank
		gerr := m.Check(&a, rank, 3, &got)
		if hit {
			hits++
		}
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("call %d %+v at rank %d (memo hit %v): err %v, want %v", i, a, rank, hit, gerr, werr)
		}
		if werr == nil && !sameCall(&got, &want) {
			t.Fatalf("call %d %+v at rank %d (memo hit %v): %+v, want %+v", i, a, rank, hit, got, want)
		}
	}
	if hits < 1000 {
		t.Fatalf("%d memo hits in 20000 calls: the test does not exercise the memo", hits)
	}
}

func sameCall(a, b *Call) bool {
	same := func(x, y []byte) bool {
		return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	}
	return a.Count == b.Count && a.Root == b.Root && a.InPlace == b.InPlace && a.Spec == b.Spec && a.DT == b.DT &&
		a.Op == b.Op && a.Digest == b.Digest && same(a.In, b.In) && same(a.Out, b.Out) && same(a.Avg, b.Avg)
}

func TestMemoAllocs(t *testing.T) {
	send, recv := make([]byte, 64), make([]byte, 64)
	a := Args{Coll: sched.AllReduce, Send: send, Recv: recv, DT: f32, Op: sum}
	var m Memo
	if n := testing.AllocsPerRun(100, func() {
		var k Call
		if err := m.Check(&a, 0, 2, &k); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per check, want 0", n)
	}
}

func BenchmarkMemoCheck(b *testing.B) {
	send, recv := make([]byte, 8), make([]byte, 8)
	a := Args{Coll: sched.AllReduce, Send: send, Recv: recv, DT: f32, Op: sum}
	var m Memo
	b.ReportAllocs()
	for b.Loop() {
		var k Call
		if err := m.Check(&a, 0, 2, &k); err != nil {
			b.Fatal(err)
		}
	}
}
