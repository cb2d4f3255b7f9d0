package main

import (
	"context"

	"github.com/hcomm-go/hcomm"
)

// The benchmark setups: per collective, its buffers, its call, and an oracle
// that counts the elements a verified iteration got wrong.

// benchOp is one collective perf can measure.
type benchOp struct {
	// setup allocates the buffers of one point and returns how to run
	// and check it.
	setup func(c *hcomm.Comm, size int64, inPlace bool, dt hcomm.DType, op hcomm.Op) bench
	// factor is the nccl-tests bus bandwidth factor for n ranks.
	factor func(n int) float64
}

// bench is one point: its reported size, the call, and its check.
type bench struct {
	bytes, count int64
	typ, redop   string
	root         int
	run          func(ctx context.Context) error
	fill         func()
	wrong        func() int64
}

func ringFactor(n int) float64 { return float64(n-1) / float64(n) }

var benchOps = map[string]benchOp{
	"allreduce":     {setupReducing("allreduce"), func(n int) float64 { return 2 * ringFactor(n) }},
	"allgather":     {setupAllGather, ringFactor},
	"reducescatter": {setupReducing("reducescatter"), ringFactor},
	"broadcast":     {setupBroadcast, func(int) float64 { return 1 }},
	"reduce":        {setupReducing("reduce"), func(int) float64 { return 1 }},
	"alltoall":      {setupAllToAll, ringFactor},
	"barrier":       {setupBarrier, func(int) float64 { return 0 }},
}

// patternByte is rank r's byte i for the collectives that move bytes.
func patternByte(r, i int) byte { return byte(r*131 + i*7 + 1) }

// elemCount is a requested size in whole elements of esize bytes, per
// unit ranks, at least one.
func elemCount(size int64, esize, unit int) int64 {
	return max(size/int64(esize)/int64(unit), 1)
}

func setupAllGather(c *hcomm.Comm, size int64, inPlace bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := int64(c.Size())
	per := elemCount(size, 1, c.Size())
	recv := newBytes(c, per*n)
	send := newBytes(c, per)
	if inPlace {
		send = recv[int64(c.Rank())*per : int64(c.Rank()+1)*per]
	}
	return bench{bytes: per * n, count: per, typ: "uint8", root: -1,
		run: func(ctx context.Context) error { return hcomm.AllGather(ctx, c, send, recv) },
		fill: func() {
			clear(recv)
			for i := range send {
				send[i] = patternByte(c.Rank(), i)
			}
		},
		wrong: func() (w int64) {
			for i, v := range recv {
				if v != patternByte(i/int(per), i%int(per)) {
					w++
				}
			}
			return w
		}}
}

func setupBroadcast(c *hcomm.Comm, size int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := max(size, 1)
	buf := newBytes(c, n)
	return bench{bytes: n, count: n, typ: "uint8", root: 0,
		run: func(ctx context.Context) error { return hcomm.Broadcast(ctx, c, buf, 0) },
		fill: func() {
			for i := range buf {
				buf[i] = 0
				if c.Rank() == 0 {
					buf[i] = patternByte(0, i)
				}
			}
		},
		wrong: func() (w int64) {
			for i, v := range buf {
				if v != patternByte(0, i) {
					w++
				}
			}
			return w
		}}
}

// alltoallByte is the byte i that rank src sends to rank dst.
func alltoallByte(src, dst, i int) byte { return byte(src*37 + dst*11 + i*5 + 3) }

func setupAllToAll(c *hcomm.Comm, size int64, inPlace bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := int64(c.Size())
	per := elemCount(size, 1, c.Size())
	send := newBytes(c, per*n)
	recv := newBytes(c, per*n)
	if inPlace {
		recv = send
	}
	return bench{bytes: per * n, count: per, typ: "uint8", root: -1,
		run: func(ctx context.Context) error { return hcomm.AllToAll(ctx, c, send, recv) },
		fill: func() {
			clear(recv)
			for i := range send {
				send[i] = alltoallByte(c.Rank(), i/int(per), i%int(per))
			}
		},
		wrong: func() (w int64) {
			for i, v := range recv {
				if v != alltoallByte(i/int(per), c.Rank(), i%int(per)) {
					w++
				}
			}
			return w
		}}
}

func setupBarrier(c *hcomm.Comm, _ int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
	return bench{typ: "-", root: -1,
		run:   func(ctx context.Context) error { return c.Barrier(ctx) },
		fill:  func() {},
		wrong: func() int64 { return 0 }}
}

// setupReducing returns the setup of a reducing collective ("allreduce",
// "reduce" or "reducescatter") for any element type.
func setupReducing(kind string) func(*hcomm.Comm, int64, bool, hcomm.DType, hcomm.Op) bench {
	return func(c *hcomm.Comm, size int64, inPlace bool, dt hcomm.DType, op hcomm.Op) bench {
		switch dt {
		case hcomm.DTypeInt8:
			return reducingBench(kind, c, size, inPlace, op, numArith[int8](false))
		case hcomm.DTypeUint8:
			return reducingBench(kind, c, size, inPlace, op, numArith[uint8](false))
		case hcomm.DTypeInt32:
			return reducingBench(kind, c, size, inPlace, op, numArith[int32](false))
		case hcomm.DTypeUint32:
			return reducingBench(kind, c, size, inPlace, op, numArith[uint32](false))
		case hcomm.DTypeInt64:
			return reducingBench(kind, c, size, inPlace, op, numArith[int64](false))
		case hcomm.DTypeUint64:
			return reducingBench(kind, c, size, inPlace, op, numArith[uint64](false))
		case hcomm.DTypeFloat16:
			return reducingBench(kind, c, size, inPlace, op, halfArith(hcomm.Float16From, hcomm.Float16.Float32))
		case hcomm.DTypeBFloat16:
			return reducingBench(kind, c, size, inPlace, op, halfArith(hcomm.BFloat16From, hcomm.BFloat16.Float32))
		case hcomm.DTypeFloat64:
			return reducingBench(kind, c, size, inPlace, op, numArith[float64](true))
		}
		return reducingBench(kind, c, size, inPlace, op, numArith[float32](true))
	}
}

// arith is the arithmetic of one element type that the checks need.
type arith[T hcomm.Element] struct {
	// class picks the input pattern: "int", "float" or "half".
	class    string
	of       func(int64) T
	add, mul func(a, b T) T
	less     func(a, b T) bool
	div      func(a T, n int) T
}

type number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

func numArith[T number](float bool) arith[T] {
	a := arith[T]{class: "int",
		of:   func(x int64) T { return T(x) },
		add:  func(a, b T) T { return a + b },
		mul:  func(a, b T) T { return a * b },
		less: func(a, b T) bool { return a < b },
	}
	var zero T
	switch {
	case float:
		a.class = "float"
		a.div = func(x T, n int) T { return x / T(n) }
	case zero-1 < 0: // signed
		a.div = func(x T, n int) T { return T(int64(x) / int64(n)) }
	default:
		a.div = func(x T, n int) T { return T(uint64(x) / uint64(n)) }
	}
	return a
}

func halfArith[T hcomm.Float16 | hcomm.BFloat16](from func(float32) T, to func(T) float32) arith[T] {
	return arith[T]{class: "half",
		of:   func(x int64) T { return from(float32(x)) },
		add:  func(a, b T) T { return from(to(a) + to(b)) },
		mul:  func(a, b T) T { return from(to(a) * to(b)) },
		less: func(a, b T) bool { return to(a) < to(b) },
		div:  func(x T, n int) T { return from(to(x) / float32(n)) },
	}
}

// inputPeriod is the period, in elements, of every input pattern except
// the float product's.
const inputPeriod = 61

// patternPeriod is the period of the inputs of op over n ranks.
func patternPeriod(class string, op hcomm.Op, n int) int {
	switch {
	case class == "int":
		return 251
	case op == hcomm.Prod:
		return 3 * n * inputPeriod
	}
	return inputPeriod
}

// inputValue is rank r's input element i (of a pattern repeating every
// patternPeriod elements) for op over n ranks. Integer inputs are
// arbitrary, since integer arithmetic wraps exactly in any order. Floating
// point inputs are small integers chosen so that every partial result is
// exact in the type, whatever order the ranks' values are combined in:
// sums stay below 2^8 in magnitude for 16-bit floats at up to 64 ranks,
// products are ±1 or ±2, and the values averaged sum to n times an
// integer.
func inputValue(class string, op hcomm.Op, n, r, i int) int64 {
	if class == "int" {
		return int64(uint64(r*131+(i%251)*7+1) * 0x9E3779B97F4A7C15)
	}
	j := i % inputPeriod
	switch op {
	case hcomm.Prod:
		switch {
		case i%n == r:
			return 2
		case (r+i)%3 == 0:
			return -1
		}
		return 1
	case hcomm.Avg:
		// base(j) plus a per-rank offset; the offsets cancel in pairs.
		d := int64((r/2)%3 + 1)
		switch {
		case r%2 == 1:
			d = -d
		case r == n-1:
			d = 0
		}
		return int64(j%5-2) + d
	}
	if class == "half" {
		return int64((r+1)*(j+1)%9 - 4)
	}
	return int64((r+1)*(j%7+1) - 8 + j/7)
}

// reducingBench sets up allreduce, reduce or reducescatter of T values.
func reducingBench[T hcomm.Element](kind string, c *hcomm.Comm, size int64, inPlace bool, op hcomm.Op, a arith[T]) bench {
	var zero T
	esize := hcomm.DTypeOf[T]().Size()
	n, rank := c.Size(), c.Rank()
	period := patternPeriod(a.class, op, n)
	in := make([]T, period) // this rank's inputs over one period
	want := make([]T, period)
	for i := range period {
		in[i] = a.of(inputValue(a.class, op, n, rank, i))
		acc := a.of(inputValue(a.class, op, n, 0, i))
		for r := 1; r < n; r++ {
			v := a.of(inputValue(a.class, op, n, r, i))
			switch op {
			case hcomm.Prod:
				acc = a.mul(acc, v)
			case hcomm.Min:
				if a.less(v, acc) {
					acc = v
				}
			case hcomm.Max:
				if a.less(acc, v) {
					acc = v
				}
			default:
				acc = a.add(acc, v)
			}
		}
		if op == hcomm.Avg {
			acc = a.div(acc, n)
		}
		want[i] = acc
	}
	b := bench{typ: hcomm.DTypeOf[T]().String(), redop: op.String(), root: -1}
	var send, recv []T
	base := 0 // index of recv[0] in the full vector
	switch kind {
	case "allreduce", "reduce":
		b.count = elemCount(size, esize, 1)
		b.bytes = b.count * int64(esize)
		send = newElems[T](c, b.count)
		if kind == "allreduce" || rank == 0 {
			recv = newElems[T](c, b.count)
			if inPlace {
				recv = send
			}
		}
		if kind == "reduce" {
			b.root = 0
		}
	default: // reducescatter
		b.count = elemCount(size, esize, n)
		b.bytes = b.count * int64(n) * int64(esize)
		send = newElems[T](c, b.count*int64(n))
		base = rank * int(b.count)
		recv = newElems[T](c, b.count)
		if inPlace {
			recv = send[base : base+int(b.count)]
		}
	}
	switch kind {
	case "allreduce":
		b.run = func(ctx context.Context) error { return hcomm.AllReduce(ctx, c, send, recv, op) }
	case "reduce":
		b.run = func(ctx context.Context) error { return hcomm.Reduce(ctx, c, send, recv, op, 0) }
	default:
		b.run = func(ctx context.Context) error { return hcomm.ReduceScatter(ctx, c, send, recv, op) }
	}
	b.fill = func() {
		if !inPlace {
			for i := range recv {
				recv[i] = zero
			}
		}
		for i := range send {
			send[i] = in[i%period]
		}
	}
	b.wrong = func() (w int64) {
		for i, v := range recv {
			if v != want[(base+i)%period] {
				w++
			}
		}
		return w
	}
	return b
}
