package hcomm

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// This file proves the collectives over NewLocal against a reference
// computed in plain Go: every collective × every element type × every
// reduction op × edge-case counts × in place and out of place, for
// n = 1..9 and 16.
//
// Inputs are small integers, so every reduction is exact in every type
// whatever the order of operations, and the expected bits are known.

// val is rank r's input element i as an exact small integer. Unsigned types
// get non-negative values so Min/Max order like the integers.
func val(dt DType, r, i int) int64 {
	h := uint64(r)*0x9E3779B97F4A7C15 + uint64(i)*0xBF58476D1CE4E5B9
	h ^= h >> 29
	switch dt {
	case DTypeUint8, DTypeUint32, DTypeUint64:
		return int64(h % 5) // 0..4
	case DTypeFloat16, DTypeBFloat16, DTypeFloat32, DTypeFloat64:
		return int64(h%5) - 2 // -2..2: products of 16 stay exact
	}
	return int64(h%9) - 4 // -4..4
}

// fromInt converts an exact integer to T (wrapping for integer types,
// rounding to nearest for floats).
func fromInt[T Element](v int64) T { return convOf[T]()(v) }

// convOf returns fromInt's conversion for T, resolved once.
func convOf[T Element]() func(int64) T {
	switch DTypeOf[T]() {
	case DTypeFloat16:
		return func(v int64) T { return T(Float16From(float32(v))) }
	case DTypeBFloat16:
		return func(v int64) T { return T(BFloat16From(float32(v))) }
	}
	return func(v int64) T { return T(v) }
}

// refReduce reduces the exact values vs (one per rank) as the library must.
func refReduce[T Element](op Op, vs []int64) T { return newRef[T]().reduce(op, vs) }

// ref computes reference results for T.
type ref[T Element] struct {
	dt   DType
	conv func(int64) T
}

func newRef[T Element]() ref[T] { return ref[T]{DTypeOf[T](), convOf[T]()} }

func (f ref[T]) reduce(op Op, vs []int64) T {
	acc := vs[0]
	for _, v := range vs[1:] {
		switch op {
		case Sum, Avg:
			acc += v
		case Prod:
			acc *= v
		case Min:
			acc = min(acc, v)
		case Max:
			acc = max(acc, v)
		}
	}
	isFloat := f.dt == DTypeFloat16 || f.dt == DTypeBFloat16 || f.dt == DTypeFloat32 || f.dt == DTypeFloat64
	if op == Prod && acc == 0 && isFloat {
		// A float product with a zero factor is a zero whose sign is the
		// parity of the negative factors, in any order.
		neg := 0
		for _, v := range vs {
			if v < 0 {
				neg++
			}
		}
		if neg%2 == 1 {
			return negZero[T]()
		}
	}
	if op != Avg {
		return f.conv(acc)
	}
	n := int64(len(vs))
	switch f.dt {
	case DTypeFloat16:
		return T(Float16From(float32(acc) / float32(n)))
	case DTypeBFloat16:
		return T(BFloat16From(float32(acc) / float32(n)))
	case DTypeFloat32:
		return T(any(float32(acc) / float32(n)).(float32))
	case DTypeFloat64:
		return T(any(float64(acc) / float64(n)).(float64))
	}
	return f.conv(acc) / T(n)
}

func negZero[T Element]() T {
	nz := float32(math.Copysign(0, -1))
	switch DTypeOf[T]() {
	case DTypeFloat16:
		return T(Float16From(nz))
	case DTypeBFloat16:
		return T(BFloat16From(nz))
	case DTypeFloat32:
		return T(any(nz).(float32))
	}
	return T(any(float64(nz)).(float64))
}

func input[T Element](r, n int) []T { return inputAt[T](r, 0, n) }

// inputAt is like input but element i holds val(dt, r, base+i).
func inputAt[T Element](r, base, n int) []T {
	dt, conv := DTypeOf[T](), convOf[T]()
	s := make([]T, n)
	for i := range s {
		s[i] = conv(val(dt, r, base+i))
	}
	return s
}

func eqBits[T Element](a, b []T) bool { return bytes.Equal(bytesOf(a), bytesOf(b)) }

// firstDiff returns a description of the first differing element (bits
// compared, so NaNs of one pattern are equal). Equal slices are compared
// whole: per element, every view of an element's bytes pays the race
// build's pointer checks.
func firstDiff[T Element](got, want []T) string {
	if len(got) != len(want) {
		return fmt.Sprintf("len %d, want %d", len(got), len(want))
	}
	if eqBits(got, want) {
		return ""
	}
	for i := range got {
		if !eqBits(got[i:i+1], want[i:i+1]) {
			return fmt.Sprintf("element %d = %v, want %v", i, got[i], want[i])
		}
	}
	return ""
}

// par runs f for every rank concurrently and returns the errors.
func par(comms []*Comm, f func(c *Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func noErrs(t *testing.T, what string, errs []error) bool {
	t.Helper()
	ok := true
	for r, err := range errs {
		if err != nil {
			t.Errorf("%s: rank %d: %v", what, r, err)
			ok = false
		}
	}
	return ok
}

var allOps = []Op{Sum, Prod, Min, Max, Avg}

func matrixSizes() []int {
	if testing.Short() {
		return []int{1, 2, 3, 5, 8}
	}
	return []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16}
}

func counts(n int) []int { return []int{0, 1, max(n-1, 0), n + 1} }

// checker collects results per rank and compares them with a reference.
type checker[T Element] struct {
	t    *testing.T
	name string
}

func (k checker[T]) check(r int, got, want []T) {
	if d := firstDiff(got, want); d != "" {
		k.t.Errorf("%s: rank %d: %s", k.name, r, d)
	}
}

// runner runs f on every rank this process drives: all of them for
// NewLocal, one in a multi-process job.
type runner struct {
	n     int
	comms []*Comm
}

func (rn runner) run(f func(c *Comm) error) []error { return par(rn.comms, f) }

// testMatrix runs every collective for one element type over comms.
func testMatrix[T Element](t *testing.T, comms []*Comm, algo string) {
	matrixOn[T](t, runner{len(comms), comms}, algo)
}

// testMatrixOn runs the matrix as one rank of a multi-process job.
func testMatrixOn[T Element](t *testing.T, c *Comm) {
	matrixOn[T](t, runner{c.Size(), []*Comm{c}}, "")
}

func matrixOn[T Element](t *testing.T, rn runner, algo string) {
	ctx := context.Background()
	dt := DTypeOf[T]()
	for _, count := range counts(rn.n) {
		for _, inplace := range []bool{false, true} {
			tag := fmt.Sprintf("%v n=%d count=%d inplace=%v algo=%q", dt, rn.n, count, inplace, algo)
			for _, op := range allOps {
				matrixReductions[T](t, ctx, rn, count, inplace, op, tag)
			}
			matrixMoves[T](t, ctx, rn, count, inplace, tag)
		}
	}
}

func matrixReductions[T Element](t *testing.T, ctx context.Context, rn runner, count int, inplace bool, op Op, tag string) {
	n := rn.n
	rf := newRef[T]()
	tag = fmt.Sprintf("%s op=%v", tag, op)
	exact := func(i int) []int64 {
		vs := make([]int64, n)
		for r := range vs {
			vs[r] = val(rf.dt, r, i)
		}
		return vs
	}
	// AllReduce and Reduce.
	want := make([]T, count)
	for i := range want {
		want[i] = rf.reduce(op, exact(i))
	}
	name := "AllReduce " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		in := reg(c, input[T](c.Rank(), count))
		out := in
		if !inplace {
			out = mem[T](c, count)
		}
		if err := AllReduce(ctx, c, in, out, op); err != nil {
			return err
		}
		checker[T]{t, name}.check(c.Rank(), out, want)
		return nil
	}))
	root := (count + 1) % n
	name = "Reduce " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		in := reg(c, input[T](c.Rank(), count))
		var out []T
		if c.Rank() == root {
			out = in
			if !inplace {
				out = mem[T](c, count)
			}
		}
		if err := Reduce(ctx, c, in, out, op, root); err != nil {
			return err
		}
		if c.Rank() == root {
			checker[T]{t, name}.check(root, out, want)
		}
		return nil
	}))
	// ReduceScatter: block r of the reduction of n*count elements.
	total := n * count
	full := make([]T, total)
	for i := range full {
		full[i] = rf.reduce(op, exact(i))
	}
	name = "ReduceScatter " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		in := reg(c, input[T](r, total))
		out := mem[T](c, count)
		if inplace {
			out = in[r*count : (r+1)*count]
		}
		if err := ReduceScatter(ctx, c, in, out, op); err != nil {
			return err
		}
		checker[T]{t, name}.check(r, out, full[r*count:(r+1)*count])
		return nil
	}))
	// ReduceScatterV with uneven counts.
	cs := vcounts(n, count)
	sum, displ := 0, make([]int, n)
	for r, c := range cs {
		displ[r] = sum
		sum += c
	}
	fullV := make([]T, sum)
	for i := range fullV {
		fullV[i] = rf.reduce(op, exact(i))
	}
	name = "ReduceScatterV " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		in := reg(c, input[T](r, sum))
		out := mem[T](c, cs[r])
		if inplace {
			out = in[displ[r] : displ[r]+cs[r]]
		}
		if err := ReduceScatterV(ctx, c, in, out, cs, op); err != nil {
			return err
		}
		checker[T]{t, name}.check(r, out, fullV[displ[r]:displ[r]+cs[r]])
		return nil
	}))
}

// vcounts returns uneven per-rank counts (some zero) derived from count.
func vcounts(n, count int) []int {
	cs := make([]int, n)
	for r := range cs {
		cs[r] = (count + 3*r) % (count + 2)
		if r%3 == 2 {
			cs[r] = 0
		}
	}
	return cs
}

func matrixMoves[T Element](t *testing.T, ctx context.Context, rn runner, count int, inplace bool, tag string) {
	n := rn.n
	root := (count + 2) % n
	name := "Broadcast " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		buf := mem[T](c, count)
		if c.Rank() == root {
			buf = reg(c, input[T](root, count))
		}
		if err := Broadcast(ctx, c, buf, root); err != nil {
			return err
		}
		checker[T]{t, name}.check(c.Rank(), buf, input[T](root, count))
		return nil
	}))
	// AllGather and Gather.
	wantAll := make([]T, 0, n*count)
	for r := 0; r < n; r++ {
		wantAll = append(wantAll, input[T](r, count)...)
	}
	name = "AllGather " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		out := mem[T](c, n*count)
		in := reg(c, input[T](r, count))
		if inplace {
			copy(out[r*count:], in)
			in = out[r*count : (r+1)*count]
		}
		if err := AllGather(ctx, c, in, out); err != nil {
			return err
		}
		checker[T]{t, name}.check(r, out, wantAll)
		return nil
	}))
	name = "Gather " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		in := reg(c, input[T](r, count))
		var out []T
		if r == root {
			out = mem[T](c, n*count)
			if inplace {
				copy(out[r*count:], in)
				in = out[r*count : (r+1)*count]
			}
		}
		if err := Gather(ctx, c, in, out, root); err != nil {
			return err
		}
		if r == root {
			checker[T]{t, name}.check(root, out, wantAll)
		}
		return nil
	}))
	// AllGatherV.
	cs := vcounts(n, count)
	var wantV []T
	displ := make([]int, n)
	for r := 0; r < n; r++ {
		displ[r] = len(wantV)
		wantV = append(wantV, input[T](r, cs[r])...)
	}
	name = "AllGatherV " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		out := make([]T, len(wantV))
		in := reg(c, input[T](r, cs[r]))
		if inplace {
			copy(out[displ[r]:], in)
			in = out[displ[r] : displ[r]+cs[r]]
		}
		if err := AllGatherV(ctx, c, in, out, cs); err != nil {
			return err
		}
		checker[T]{t, name}.check(r, out, wantV)
		return nil
	}))
	// Scatter: root's block r goes to rank r.
	rootData := input[T](root, n*count)
	name = "Scatter " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		var in []T
		out := mem[T](c, count)
		if r == root {
			in = reg(c, rootData)
			if inplace {
				out = in[r*count : (r+1)*count]
			}
		}
		if err := Scatter(ctx, c, in, out, root); err != nil {
			return err
		}
		checker[T]{t, name}.check(r, out, rootData[r*count:(r+1)*count])
		return nil
	}))
	// AllToAll: rank s's block d holds values (s, d*count+i).
	name = "AllToAll " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		in := reg(c, input[T](r, n*count))
		out := in
		if !inplace {
			out = mem[T](c, n*count)
		}
		if err := AllToAll(ctx, c, in, out); err != nil {
			return err
		}
		var want []T
		for s := 0; s < n; s++ {
			want = append(want, inputAt[T](s, r*count, count)...)
		}
		checker[T]{t, name}.check(r, out, want)
		return nil
	}))
	// AllToAllV: rank s sends m(s,d) elements to d; symmetric when in place.
	m := func(s, d int) int {
		if inplace {
			s, d = min(s, d), max(s, d)
		}
		return (s*7 + d*3 + count) % (count + 2)
	}
	name = "AllToAllV " + tag
	noErrs(t, name, rn.run(func(c *Comm) error {
		r := c.Rank()
		sc, rc := make([]int, n), make([]int, n)
		st, rt := 0, 0
		for k := 0; k < n; k++ {
			sc[k], rc[k] = m(r, k), m(k, r)
			st += sc[k]
			rt += rc[k]
		}
		in := reg(c, input[T](r, st))
		out := in
		if !inplace {
			out = mem[T](c, rt)
		}
		if err := AllToAllV(ctx, c, in, sc, out, rc); err != nil {
			return err
		}
		var want []T
		for s := 0; s < n; s++ {
			off := 0
			for k := 0; k < r; k++ {
				off += m(s, k)
			}
			want = append(want, inputAt[T](s, off, m(s, r))...)
		}
		checker[T]{t, name}.check(r, out, want)
		return nil
	}))
	// Send/Recv around a ring: even ranks send first, odd ranks receive
	// first, so no pair waits on itself.
	if n > 1 {
		name = "Send/Recv " + tag
		noErrs(t, name, rn.run(func(c *Comm) error {
			r := c.Rank()
			next, prev := (r+1)%n, (r+n-1)%n
			out := make([]T, count)
			sendFirst := r%2 == 0 && !(n%2 == 1 && r == n-1)
			if sendFirst {
				if err := Send(ctx, c, input[T](r, count), next, 7); err != nil {
					return err
				}
				if err := Recv(ctx, c, out, prev, 7); err != nil {
					return err
				}
			} else {
				if err := Recv(ctx, c, out, prev, 7); err != nil {
					return err
				}
				if err := Send(ctx, c, input[T](r, count), next, 7); err != nil {
					return err
				}
			}
			checker[T]{t, name}.check(r, out, input[T](prev, count))
			return nil
		}))
	}
	noErrs(t, "Barrier "+tag, rn.run(func(c *Comm) error { return c.Barrier(ctx) }))
}

func forEachType(t *testing.T, comms []*Comm, algo string) {
	testMatrix[int8](t, comms, algo)
	testMatrix[uint8](t, comms, algo)
	testMatrix[int32](t, comms, algo)
	testMatrix[uint32](t, comms, algo)
	testMatrix[int64](t, comms, algo)
	testMatrix[uint64](t, comms, algo)
	testMatrix[Float16](t, comms, algo)
	testMatrix[BFloat16](t, comms, algo)
	testMatrix[float32](t, comms, algo)
	testMatrix[float64](t, comms, algo)
}

func newLocal(t testing.TB, n int, cfg *Config) []*Comm {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	comms, err := NewLocal(context.Background(), n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// TestMatrix runs the whole matrix with the planner's choices.
func TestMatrix(t *testing.T) {
	for _, n := range matrixSizes() {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			t.Parallel()
			forEachType(t, newLocal(t, n, nil), "")
		})
	}
}

// TestMatrixAlgorithms forces each algorithm in turn, with small chunks so
// that messages are cut into many pipelined pieces.
func TestMatrixAlgorithms(t *testing.T) {
	for _, algo := range algoNames() {
		for _, n := range []int{2, 3, 5, 8} {
			t.Run(fmt.Sprintf("%s/n=%d", algo, n), func(t *testing.T) {
				t.Parallel()
				comms := newLocal(t, n, &Config{Algo: algo, ChunkBytes: 8})
				testMatrix[float32](t, comms, algo)
				testMatrix[int64](t, comms, algo)
				testMatrix[Float16](t, comms, algo)
			})
		}
	}
}

// TestAllReduceLarge checks a count that is prime and large, for every type
// and op (under -short, a subset; under the race detector, float32 at three
// sizes, every op: the type changes only the reduction's arithmetic, and
// `make large` checks every type at every size without it).
func TestAllReduceLarge(t *testing.T) {
	const count = 1000003
	sizes := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16}
	if testing.Short() || raceEnabled {
		sizes = []int{2, 3, 16}
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			comms := newLocal(t, n, nil)
			largeAllReduce[float32](t, comms, count)
			if !raceEnabled {
				largeAllReduce[int32](t, comms, count)
			}
			if !raceEnabled && !testing.Short() {
				largeAllReduce[int8](t, comms, count)
				largeAllReduce[uint8](t, comms, count)
				largeAllReduce[uint32](t, comms, count)
				largeAllReduce[int64](t, comms, count)
				largeAllReduce[uint64](t, comms, count)
				largeAllReduce[Float16](t, comms, count)
				largeAllReduce[BFloat16](t, comms, count)
				largeAllReduce[float64](t, comms, count)
			}
		})
	}
}

func largeAllReduce[T Element](t *testing.T, comms []*Comm, count int) {
	n := len(comms)
	dt := DTypeOf[T]()
	ins := make([][]T, n)
	for r := range ins {
		ins[r] = input[T](r, count)
	}
	vs := make([]int64, n)
	rf := newRef[T]()
	for _, op := range allOps {
		want := make([]T, count)
		for i := range want {
			for r := range vs {
				vs[r] = val(dt, r, i)
			}
			want[i] = rf.reduce(op, vs)
		}
		for _, inplace := range []bool{false, true} {
			outs := make([][]T, n)
			errs := par(comms, func(c *Comm) error {
				in := append([]T(nil), ins[c.Rank()]...)
				out := in
				if !inplace {
					out = make([]T, count)
				}
				outs[c.Rank()] = out
				return AllReduce(context.Background(), c, in, out, op)
			})
			tag := fmt.Sprintf("AllReduce %v n=%d count=%d op=%v inplace=%v", dt, n, count, op, inplace)
			if noErrs(t, tag, errs) {
				for r := range outs {
					checker[T]{t, tag}.check(r, outs[r], want)
				}
			}
		}
	}
}

// TestDeterminism: the same inputs give bitwise the same results on every
// rank and in every run, with inputs whose float sums round.
func TestDeterminism(t *testing.T) {
	for _, algo := range []string{"", "allreduce=ring", "allreduce=rd", "allreduce=hd", "allreduce=dbtree"} {
		for _, n := range []int{3, 4, 7} {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			const count = 4099
			ins := make([][]float32, n)
			for r := range ins {
				ins[r] = make([]float32, count)
				for i := range ins[r] {
					ins[r][i] = float32(rng.NormFloat64() * 1e3)
				}
			}
			var first []float32
			for run := 0; run < 3; run++ {
				comms := newLocal(t, n, &Config{Algo: algo, ChunkBytes: 1024})
				outs := make([][]float32, n)
				errs := par(comms, func(c *Comm) error {
					outs[c.Rank()] = make([]float32, count)
					return AllReduce(context.Background(), c, ins[c.Rank()], outs[c.Rank()], Sum)
				})
				if !noErrs(t, "determinism", errs) {
					return
				}
				if first == nil {
					first = outs[0]
				}
				for r := range outs {
					if !eqBits(outs[r], first) {
						t.Fatalf("algo %q n=%d run %d: rank %d differs from rank 0 run 0: %s", algo, n, run, r, firstDiff(outs[r], first))
					}
				}
			}
		}
	}
}
