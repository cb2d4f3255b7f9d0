package reduce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

var (
	allDTypes = []DType{Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, BFloat16, Float32, Float64}
	allOps    = []Op{Sum, Prod, Min, Max, Avg}
)

// specials returns the encodings of values that stress dt: extremes and
// wrap-around points for integers; zeros, infinities, NaNs with payloads,
// subnormals and the overflow edge for floats.
func specials(dt DType) []uint64 {
	switch dt {
	case Int8, Uint8:
		return []uint64{0, 1, 2, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	case Int32, Uint32:
		return []uint64{0, 1, 2, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffffe, 0xffffffff, 0x10000}
	case Int64, Uint64:
		return []uint64{0, 1, 2, 1<<63 - 1, 1 << 63, 1<<63 + 1, 1<<64 - 2, 1<<64 - 1, 1 << 32}
	case Float16:
		return []uint64{0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01,
			0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7fff, 0x7e12, 0x5bff}
	case BFloat16:
		return []uint64{0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x3f81,
			0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fff, 0x7fd3}
	case Float32:
		return []uint64{0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x00800000, 0x3f800000, 0xbf800000,
			0x3f800001, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
			0x7f800001, 0x7fffffff, 0x7fc01234, 0x4b800000, 0x33800000}
	case Float64:
		return []uint64{0, 1 << 63, 1, 1<<63 | 1, 0x000fffffffffffff, 0x0010000000000000,
			0x3ff0000000000000, 0xbff0000000000000, 0x3ff0000000000001, 0x7fefffffffffffff,
			0xffefffffffffffff, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000,
			0xfff8000000000000, 0x7ff0000000000001, 0x7fffffffffffffff, 0x7ff8000000001234,
			0x4340000000000000, 0x3ca0000000000000}
	}
	panic("bad dtype")
}

// putElem stores the low dt.Size() bytes of v little-endian at element i.
func putElem(dt DType, buf []byte, i int, v uint64) {
	sz := dt.Size()
	for k := range sz {
		buf[i*sz+k] = byte(v >> (8 * k))
	}
}

// randomOperands fills two buffers of n elements, mixing special values
// with random bit patterns and, for floats, random moderate values so that
// sums and products are mostly finite and exercise rounding.
func randomOperands(r *rand.Rand, dt DType, n int) (a, b []byte) {
	a, b = make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
	sp := specials(dt)
	gen := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return sp[r.IntN(len(sp))]
		case 1:
			return r.Uint64()
		}
		x := r.NormFloat64() * math.Exp2(float64(r.IntN(20)-10))
		switch dt {
		case Float16:
			return uint64(F16FromF32(float32(x)))
		case BFloat16:
			return uint64(BF16FromF32(float32(x)))
		case Float32:
			return uint64(math.Float32bits(float32(x)))
		case Float64:
			return math.Float64bits(x)
		}
		return uint64(int64(x * 100))
	}
	for i := range n {
		putElem(dt, a, i, gen())
		putElem(dt, b, i, gen())
	}
	return a, b
}

// sameResult compares kernel output with the reference element by element.
// Sum and Prod results only have to agree that an element is a NaN; every
// other result must match bit for bit.
func sameResult(dt DType, op Op, got, want []byte) (int, bool) {
	sz := dt.Size()
	for i := 0; i+sz <= len(want); i += sz {
		g, w := got[i:i+sz], want[i:i+sz]
		if bytes.Equal(g, w) {
			continue
		}
		if (op == Sum || op == Prod || op == Avg) && isNaNElem(dt, g) && isNaNElem(dt, w) {
			continue
		}
		return i / sz, false
	}
	return 0, true
}

func isNaNElem(dt DType, e []byte) bool {
	switch dt {
	case Float16:
		return refF16.isNaN(binary.LittleEndian.Uint16(e))
	case BFloat16:
		return refBF16.isNaN(binary.LittleEndian.Uint16(e))
	case Float32:
		return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(e))))
	case Float64:
		return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(e)))
	}
	return false
}

// layouts places the output relative to the operands the ways Apply
// allows: disjoint, in place over a, in place over b; each also at an odd
// byte offset so that no element is aligned.
var layouts = []struct {
	name string
	run  func(dt DType, op Op, a, b []byte) []byte
}{
	{"disjoint", func(dt DType, op Op, a, b []byte) []byte {
		dst := make([]byte, len(a))
		Apply(dt, op, dst, a, b)
		return dst
	}},
	{"dst=a", func(dt DType, op Op, a, b []byte) []byte {
		dst := bytes.Clone(a)
		Apply(dt, op, dst, dst, b)
		return dst
	}},
	{"dst=b", func(dt DType, op Op, a, b []byte) []byte {
		dst := bytes.Clone(b)
		Apply(dt, op, dst, a, dst)
		return dst
	}},
	{"unaligned", func(dt DType, op Op, a, b []byte) []byte {
		n := len(a)
		buf := make([]byte, 3*n+3)
		dst, ua, ub := buf[1:1+n], buf[n+2:2*n+2], buf[2*n+3:]
		copy(ua, a)
		copy(ub, b)
		Apply(dt, op, dst, ua, ub)
		return dst
	}},
	{"unaligned dst=a", func(dt DType, op Op, a, b []byte) []byte {
		buf := make([]byte, len(a)+1)
		dst := buf[1:]
		copy(dst, a)
		Apply(dt, op, dst, dst, b)
		return dst
	}},
}

func TestApplyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			t.Run(fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 64, 1001} {
					a, b := randomOperands(r, dt, n)
					want := refApply(dt, op, a, b)
					for _, l := range layouts {
						got := l.run(dt, op, a, b)
						if i, ok := sameResult(dt, op, got, want); !ok {
							sz := dt.Size()
							t.Fatalf("n=%d %s: element %d: %x ⊕ %x = %x, want %x", n, l.name, i,
								a[i*sz:(i+1)*sz], b[i*sz:(i+1)*sz], got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz])
						}
					}
				}
			})
		}
	}
}

// TestApplySpecialPairs runs every pair of special values of every type
// through every operator, in both operand orders, and checks that Min and
// Max are commutative bit for bit and Sum and Prod up to NaN payloads.
func TestApplySpecialPairs(t *testing.T) {
	for _, dt := range allDTypes {
		sp := specials(dt)
		n := len(sp) * len(sp)
		a, b := make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
		for i, x := range sp {
			for j, y := range sp {
				putElem(dt, a, i*len(sp)+j, x)
				putElem(dt, b, i*len(sp)+j, y)
			}
		}
		for _, op := range allOps {
			ab, ba := make([]byte, len(a)), make([]byte, len(a))
			Apply(dt, op, ab, a, b)
			Apply(dt, op, ba, b, a)
			if i, ok := sameResult(dt, op, ab, refApply(dt, op, a, b)); !ok {
				t.Errorf("%v %v: element %d differs from the reference", dt, op, i)
			}
			if i, ok := sameResult(dt, op, ab, ba); !ok {
				t.Errorf("%v %v: not commutative at element %d", dt, op, i)
			}
			if (op == Min || op == Max) && !bytes.Equal(ab, ba) {
				t.Errorf("%v %v: not commutative bit for bit", dt, op)
			}
		}
	}
}

// TestMinMaxAssociative checks on triples of special values that Min and
// Max give the same bits however the three are grouped.
func TestMinMaxAssociative(t *testing.T) {
	for _, dt := range allDTypes {
		if !dt.IsFloat() {
			continue
		}
		sp := specials(dt)
		sz := dt.Size()
		x, y, z := make([]byte, sz), make([]byte, sz), make([]byte, sz)
		l, r := make([]byte, sz), make([]byte, sz)
		for _, op := range []Op{Min, Max} {
			for _, vx := range sp {
				for _, vy := range sp {
					for _, vz := range sp {
						putElem(dt, x, 0, vx)
						putElem(dt, y, 0, vy)
						putElem(dt, z, 0, vz)
						Apply(dt, op, l, x, y)
						Apply(dt, op, l, l, z)
						Apply(dt, op, r, y, z)
						Apply(dt, op, r, x, r)
						if !bytes.Equal(l, r) {
							t.Fatalf("%v %v(%x, %x, %x): (x⊕y)⊕z = %x, x⊕(y⊕z) = %x", dt, op, x, y, z, l, r)
						}
					}
				}
			}
		}
	}
}

func TestApplyCases(t *testing.T) {
	negZero32 := uint64(0x80000000)
	negZero64 := uint64(1 << 63)
	tests := []struct {
		dt      DType
		op      Op
		x, y, z uint64 // operands and expected result, as bits
	}{
		{Int8, Sum, 0x7f, 0x01, 0x80},
		{Int8, Min, 0x80, 0x7f, 0x80},
		{Uint8, Sum, 0xff, 0x01, 0x00},
		{Uint8, Min, 0x80, 0x7f, 0x7f},
		{Int8, Prod, 0x10, 0x10, 0x00},
		{Int32, Prod, 0x10000, 0x10000, 0},
		{Int32, Max, 0xffffffff, 0, 0},
		{Uint32, Max, 0xffffffff, 0, 0xffffffff},
		{Int64, Sum, 1<<63 - 1, 1, 1 << 63},
		{Int64, Min, 1 << 63, 0, 1 << 63},
		{Uint64, Min, 1 << 63, 0, 0},
		{Uint64, Avg, 1<<64 - 1, 2, 1},
		{Float32, Sum, 0x3f800000, 0x3f800000, 0x40000000},
		{Float32, Min, negZero32, 0, negZero32},
		{Float32, Min, 0, negZero32, negZero32},
		{Float32, Max, negZero32, 0, 0},
		{Float32, Max, 0, negZero32, 0},
		{Float32, Max, 0x7f800001, 0x3f800000, f32NaN},
		{Float32, Min, 0x3f800000, 0xffc01234, f32NaN},
		{Float32, Max, 0xff800000, 0x7f800000, 0x7f800000},
		{Float32, Sum, 0x7f800000, 0x3f800000, 0x7f800000},
		{Float64, Min, negZero64, 0, negZero64},
		{Float64, Max, 0, negZero64, 0},
		{Float64, Max, 0x7ff0000000000001, 0, f64NaN},
		{Float64, Prod, 0x4000000000000000, 0x4008000000000000, 0x4018000000000000},
		{Float16, Sum, 0x3c00, 0x3c00, 0x4000},
		{Float16, Sum, 0x7bff, 0x4c00, 0x7c00},   // 65504 + 16 = 65520: the tie rounds to Inf
		{Float16, Sum, 0x7bff, 0x4b80, 0x7bff},   // 65504 + 15 stays finite
		{Float16, Sum, 0x3c00, 0x0c00, 0x3c00},   // 1 + 2^-12 rounds back to 1
		{Float16, Prod, 0x0001, 0x3800, 0x0000},  // smallest subnormal / 2: tie to even (zero)
		{Float16, Prod, 0x0003, 0x3800, 0x0002},  // 1.5 units: tie to even (two)
		{Float16, Min, 0x8000, 0x0000, 0x8000},   // -0
		{Float16, Max, 0x8000, 0x0000, 0x0000},   // +0
		{Float16, Max, 0x7c01, 0x3c00, 0x7e00},   // signalling NaN: canonical quiet NaN
		{Float16, Min, 0xfc00, 0x7bff, 0xfc00},   // -Inf
		{BFloat16, Sum, 0x3f80, 0x3b80, 0x3f80},  // 1 + 2^-8: tie to even, stays 1
		{BFloat16, Sum, 0x3f81, 0x3b80, 0x3f82},  // tie to even, goes up
		{BFloat16, Prod, 0x7f7f, 0x4000, 0x7f80}, // overflow to Inf
		{BFloat16, Min, 0x7f81, 0x3f80, 0x7fc0},
		{BFloat16, Max, 0x8000, 0x0000, 0x0000},
		{BFloat16, Min, 0xbf80, 0x3f80, 0xbf80},
	}
	for _, tt := range tests {
		sz := tt.dt.Size()
		a, b, dst := make([]byte, sz), make([]byte, sz), make([]byte, sz)
		putElem(tt.dt, a, 0, tt.x)
		putElem(tt.dt, b, 0, tt.y)
		want := make([]byte, sz)
		putElem(tt.dt, want, 0, tt.z)
		Apply(tt.dt, tt.op, dst, a, b)
		if !bytes.Equal(dst, want) {
			t.Errorf("%v %v(%#x, %#x) = %x, want %x", tt.dt, tt.op, tt.x, tt.y, dst, want)
		}
	}
}

// TestHalfArithmeticCorrectlyRounded checks the claim of the package
// documentation that computing in float32 and rounding once gives the
// correctly rounded 16-bit result: for float16, on every sum and product
// with one operand from a spread of values; for bfloat16, on random pairs
// and on products that underflow float32's normal range.
func TestHalfArithmeticCorrectlyRounded(t *testing.T) {
	// Every float16 x against y drawn from a fixed spread of encodings.
	ys := []uint16{0x0001, 0x0155, 0x03ff, 0x0400, 0x1234, 0x3555, 0x3c01, 0x3fff, 0x4c00, 0x5bff, 0x7bff}
	n := 1 << 16
	a, b, dst := make([]byte, 2*n), make([]byte, 2*n), make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(a[2*i:], uint16(i))
	}
	for _, y := range ys {
		for _, sy := range []uint16{0, 0x8000} {
			for i := range n {
				binary.LittleEndian.PutUint16(b[2*i:], y|sy)
			}
			for _, op := range []Op{Sum, Prod} {
				Apply(Float16, op, dst, a, b)
				if i, ok := sameResult(Float16, op, dst, refApply(Float16, op, a, b)); !ok {
					t.Fatalf("float16 %v: %#04x ⊕ %#04x = %x", op, i, y|sy, dst[2*i:2*i+2])
				}
			}
		}
	}

	// bfloat16: random pairs over all exponents, then every encoding
	// times values that push products deep into the subnormal range,
	// where float32 itself rounds before the final rounding.
	r := rand.New(rand.NewPCG(5, 6))
	a, b, dst = make([]byte, 2*n), make([]byte, 2*n), make([]byte, 2*n)
	check := func() {
		t.Helper()
		for _, op := range []Op{Sum, Prod} {
			Apply(BFloat16, op, dst, a, b)
			if i, ok := sameResult(BFloat16, op, dst, refApply(BFloat16, op, a, b)); !ok {
				t.Fatalf("bfloat16 %v: %x ⊕ %x = %x", op, a[2*i:2*i+2], b[2*i:2*i+2], dst[2*i:2*i+2])
			}
		}
	}
	for i := range n {
		binary.LittleEndian.PutUint16(a[2*i:], uint16(r.Uint32()))
		binary.LittleEndian.PutUint16(b[2*i:], uint16(r.Uint32()))
	}
	check()
	for i := range n {
		binary.LittleEndian.PutUint16(a[2*i:], uint16(i))
	}
	for _, y := range []uint16{0x0001, 0x0055, 0x007f, 0x0080, 0x00ff, 0x0d01, 0x1f7f, 0x3f81} {
		for i := range n {
			binary.LittleEndian.PutUint16(b[2*i:], y)
		}
		check()
	}
}

func TestDivN(t *testing.T) {
	tests := []struct {
		dt   DType
		n    int
		x, z uint64
	}{
		{Int8, 2, 0xf9, 0xfd},              // -7/2 = -3
		{Int8, 2, 0x07, 0x03},              // 7/2 = 3
		{Int8, 200, 0x80, 0x00},            // n beyond int8: -128/200 = 0
		{Int8, 1, 0x80, 0x80},              // n = 1 leaves values alone
		{Uint8, 2, 0xff, 0x7f},             // 255/2
		{Uint8, 300, 0xff, 0x00},           // n beyond uint8
		{Int32, 3, 0xfffffff9, 0xfffffffe}, // -7/3 = -2
		{Uint32, 3, 0xffffffff, 0x55555555},
		{Int64, 4, 1 << 63, 0xe000000000000000}, // MinInt64/4
		{Uint64, 4, 1<<64 - 1, 1<<62 - 1},
		{Float32, 2, 0x3f800000, 0x3f000000},
		{Float32, 3, 0x3f800000, uint64(math.Float32bits(float32(1) / 3))},
		{Float32, 2, 0x00000001, 0x00000000}, // smallest subnormal / 2: tie to even
		{Float32, 4, 0x7fc01234, 0x7fc00000}, // NaN stays NaN (of any payload)
		{Float64, 3, 0x3ff0000000000000, math.Float64bits(1.0 / 3)},
		{Float16, 3, 0x3c00, 0x3555},    // 1/3
		{Float16, 2, 0x0001, 0x0000},    // tie to even
		{Float16, 2, 0x0003, 0x0002},    // tie to even
		{Float16, 4, 0x7c00, 0x7c00},    // Inf stays Inf
		{Float16, 1000, 0x7bff, 0x5418}, // 65504/1000 = 65.504 → 65.5
		{BFloat16, 3, 0x3f80, 0x3eab},   // 1/3
		{BFloat16, 2, 0x8001, 0x8000},   // -tiny/2: tie to even, sign kept
	}
	for _, tt := range tests {
		sz := tt.dt.Size()
		for _, off := range []int{0, 1} {
			buf := make([]byte, off+3*sz)[off:] // three copies, unaligned when off is 1
			for i := range 3 {
				putElem(tt.dt, buf, i, tt.x)
			}
			DivN(tt.dt, buf, tt.n)
			want := make([]byte, sz)
			putElem(tt.dt, want, 0, tt.z)
			for i := range 3 {
				if got := buf[i*sz : (i+1)*sz]; !bytes.Equal(got, want) && !(isNaNElem(tt.dt, got) && isNaNElem(tt.dt, want)) {
					t.Errorf("DivN(%v, %#x, %d) = %x, want %x", tt.dt, tt.x, tt.n, got, want)
				}
			}
		}
	}
}

// TestPortable checks the bounce path used on big-endian and
// alignment-strict machines against the reference and, where the native
// kernels can run on the test's buffers, against their bits, across chunk
// boundaries and with dst aliasing an operand.
func TestPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range allDTypes {
		n := 3*scratchWords*8/dt.Size() + 5
		a, b := randomOperands(r, dt, n)
		for _, op := range allOps {
			got := make([]byte, len(a))
			applyPortable(dt, op, got, a, b)
			if i, ok := sameResult(dt, op, got, refApply(dt, op, a, b)); !ok {
				t.Errorf("%v %v: element %d differs from the reference", dt, op, i)
			}
			inPlace := bytes.Clone(b)
			applyPortable(dt, op, inPlace, a, inPlace)
			if !bytes.Equal(inPlace, got) {
				t.Errorf("%v %v: dst=b differs from disjoint dst", dt, op)
			}
			if nativeOK(dt, got, a, b) {
				native := make([]byte, len(a))
				applyNative(dt, op, native, a, b)
				if !bytes.Equal(got, native) {
					t.Errorf("%v %v: portable differs from native", dt, op)
				}
			}
		}
		got := bytes.Clone(a)
		divPortable(dt, got, 7)
		want := bytes.Clone(a)
		DivN(dt, want, 7)
		if !bytes.Equal(got, want) {
			t.Errorf("%v: portable DivN differs from DivN", dt)
		}
	}
}

func TestByteOrderConstant(t *testing.T) {
	x := uint16(1)
	little := *(*byte)(unsafe.Pointer(&x)) == 1
	if bigEndian == little {
		t.Fatalf("bigEndian = %v on a machine where little-endian is %v", bigEndian, little)
	}
}

func TestValidPair(t *testing.T) {
	for _, dt := range allDTypes {
		for _, op := range allOps {
			if !ValidPair(dt, op) {
				t.Errorf("ValidPair(%v, %v) = false", dt, op)
			}
		}
	}
	for _, p := range []struct {
		dt DType
		op Op
	}{{0, Sum}, {numDTypes, Sum}, {Float32, 0}, {Float32, numOps}, {255, 255}} {
		if ValidPair(p.dt, p.op) {
			t.Errorf("ValidPair(%v, %v) = true", p.dt, p.op)
		}
	}
}

func TestApplyDoesNotAllocate(t *testing.T) {
	for _, dt := range allDTypes {
		a, b := make([]byte, 64*8+1), make([]byte, 64*8+1)
		dst := make([]byte, 64*8+1)
		for _, op := range allOps {
			allocs := testing.AllocsPerRun(10, func() {
				Apply(dt, op, dst[:64*8], a[:64*8], b[:64*8])
				Apply(dt, op, dst[1:], a[1:], b[1:])
				DivN(dt, dst[:64*8], 3)
				applyPortable(dt, op, dst[:64*8], a[:64*8], b[:64*8])
			})
			if allocs != 0 {
				t.Errorf("%v %v: %v allocations per call", dt, op, allocs)
			}
		}
	}
}

// FuzzApply reads a type, an operator and a layout from the first bytes of
// the input, splits the rest into two operands, and compares Apply with the
// reference.
func FuzzApply(f *testing.F) {
	f.Add([]byte{byte(Float32), byte(Min), 0, 0, 0, 0x80, 0, 0, 0, 0, 0})
	f.Add([]byte{byte(Float16), byte(Sum), 1, 0xff, 0x7b, 0x00, 0x4c})
	f.Add([]byte{byte(BFloat16), byte(Max), 2, 0x81, 0x7f, 0x80, 0x3f})
	f.Add([]byte{byte(Int8), byte(Prod), 0, 0x10, 0x10})
	f.Add([]byte{byte(Float64), byte(Prod), 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		dt := allDTypes[int(data[0])%len(allDTypes)]
		op := allOps[int(data[1])%len(allOps)]
		layout := layouts[int(data[2])%len(layouts)]
		data = data[3:]
		sz := dt.Size()
		n := len(data) / 2 / sz * sz
		a, b := data[:n], data[n:2*n]
		want := refApply(dt, op, a, b)
		got := layout.run(dt, op, a, b)
		if i, ok := sameResult(dt, op, got, want); !ok {
			t.Fatalf("%v %v %s: element %d: %x ⊕ %x = %x, want %x", dt, op, layout.name, i,
				a[i*sz:(i+1)*sz], b[i*sz:(i+1)*sz], got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz])
		}
	})
}
