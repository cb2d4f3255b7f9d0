package reduce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The tests in this file hold the vector kernels to their scalar twin,
// applyScalar: the same bits for every type, operator, length, alignment
// and aliasing, except that a NaN from Sum or Prod may carry the payload
// of either NaN operand (the scalar code leaves the operand order of its
// additions to the compiler). On machines without the instruction sets the
// vector kernels need, the comparisons pass trivially; TestVectorFallback
// runs the scalar paths through Apply on every machine.

// applyVectorOrScalar is applyNative with the choice of stores made.
func applyVectorOrScalar(dt DType, op Op, dst, a, b []byte, nt bool) {
	if !applyVectorNT(dt, op, dst, a, b, nt) {
		applyScalar(dt, op, dst, a, b)
	}
}

// quietBit returns the quiet bit of dt's NaNs, or 0 for an integer type.
func quietBit(dt DType) uint64 {
	switch dt {
	case Float16:
		return f16QuietBit
	case BFloat16:
		return bf16QuietBit
	case Float32:
		return 1 << 22
	case Float64:
		return 1 << 51
	}
	return 0
}

func getElem(dt DType, buf []byte, i int) uint64 {
	sz := dt.Size()
	var v uint64
	for k := range sz {
		v |= uint64(buf[i*sz+k]) << (8 * k)
	}
	return v
}

// agreesWithScalar compares the vector path's output got with the scalar
// twin's want for the operands a and b, and returns the index of the first
// element that differs. Elements must be equal bit for bit, with one
// exception: where Sum or Prod gives a NaN with a NaN operand, got may be
// either NaN operand quieted.
func agreesWithScalar(dt DType, op Op, got, want, a, b []byte) (int, bool) {
	sz := dt.Size()
	for i := 0; i < len(want)/sz; i++ {
		g, w := got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]
		if bytes.Equal(g, w) {
			continue
		}
		if (op == Sum || op == Prod || op == Avg) && dt.IsFloat() && isNaNElem(dt, w) {
			gv, q := getElem(dt, got, i), quietBit(dt)
			ea, eb := a[i*sz:(i+1)*sz], b[i*sz:(i+1)*sz]
			if isNaNElem(dt, ea) && gv == getElem(dt, a, i)|q ||
				isNaNElem(dt, eb) && gv == getElem(dt, b, i)|q {
				continue
			}
		}
		return i, false
	}
	return 0, true
}

// placement puts dst and the operands at byte offsets into fresh buffers,
// or makes dst one of the operands.
type placement struct {
	name             string
	dOff, aOff, bOff int
	alias            int // 0: dst disjoint; 1: dst is a; 2: dst is b
}

var placements = []placement{
	{"aligned", 0, 0, 0, 0},
	{"odd offsets", 1, 2, 3, 0},
	{"element-aligned offsets", 8, 16, 24, 0},
	{"mixed offsets", 16, 0, 4, 0},
	{"dst=a", 0, 0, 0, 1},
	{"dst=b offset", 0, 2, 6, 2},
}

// run computes a ⊕ b with f, laying out the buffers as p says.
func (p placement) run(dt DType, op Op, a, b []byte, f func(dt DType, op Op, dst, a, b []byte)) []byte {
	n := len(a)
	pa := make([]byte, p.aOff+n)[p.aOff:]
	pb := make([]byte, p.bOff+n)[p.bOff:]
	copy(pa, a)
	copy(pb, b)
	var dst []byte
	switch p.alias {
	case 1:
		dst = pa
	case 2:
		dst = pb
	default:
		dst = make([]byte, p.dOff+n)[p.dOff:]
	}
	f(dt, op, dst, pa, pb)
	return dst
}

// checkVector runs a ⊕ b through the vector path in every placement, with
// and without non-temporal stores, and compares each result with the
// scalar twin's.
func checkVector(t *testing.T, dt DType, op Op, a, b []byte) {
	t.Helper()
	want := make([]byte, len(a))
	applyScalar(dt, op, want, a, b)
	for _, p := range placements {
		for _, nt := range []bool{false, true} {
			got := p.run(dt, op, a, b, func(dt DType, op Op, dst, a, b []byte) {
				applyVectorOrScalar(dt, op, dst, a, b, nt)
			})
			if i, ok := agreesWithScalar(dt, op, got, want, a, b); !ok {
				sz := dt.Size()
				t.Fatalf("%d elements, %s, nt=%v: element %d: %x ⊕ %x = %x, scalar %x",
					len(a)/sz, p.name, nt, i, a[i*sz:(i+1)*sz], b[i*sz:(i+1)*sz],
					got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz])
			}
		}
	}
}

func TestVectorMatchesScalar(t *testing.T) {
	t.Logf("vector instruction sets: %+v", isa)
	lengths := make([]int, 0, 310)
	for n := range 301 {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1023, 4099, 1<<15+5)
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			t.Run(fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				for _, n := range lengths {
					a, b := randomOperands(r, dt, n)
					checkVector(t, dt, op, a, b)
				}
			})
		}
	}
}

// TestVectorSpecialPairs puts every pair of special values of each type in
// every lane position of a vector, in both operand orders.
func TestVectorSpecialPairs(t *testing.T) {
	for _, dt := range allDTypes {
		sp := specials(dt)
		lanes := vecBytes / dt.Size()
		// Repeating the pairs with a count that is not a multiple of the
		// lanes shifts each pair through every lane.
		n := len(sp) * len(sp) * (lanes + 1)
		a, b := make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
		for i := range n {
			k := i % (len(sp) * len(sp))
			putElem(dt, a, i, sp[k/len(sp)])
			putElem(dt, b, i, sp[k%len(sp)])
		}
		for _, op := range allOps {
			t.Run(fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				checkVector(t, dt, op, a, b)
				checkVector(t, dt, op, b, a)
			})
		}
	}
}

// TestVectorHalfEncodings runs every binary16 and bfloat16 encoding
// against a spread of partners, NaNs with payloads, zeros, infinities and
// subnormals among them, through every operator.
func TestVectorHalfEncodings(t *testing.T) {
	const n = 1 << 16
	a, b := make([]byte, 2*n), make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(a[2*i:], uint16(i))
	}
	for _, dt := range []DType{Float16, BFloat16} {
		partners := append(specials(dt), 0x1234, 0x9234, 0x3555)
		for _, op := range allOps {
			got, want := make([]byte, 2*n), make([]byte, 2*n)
			for _, y := range partners {
				for i := range n {
					binary.LittleEndian.PutUint16(b[2*i:], uint16(y))
				}
				for _, order := range [][2][]byte{{a, b}, {b, a}} {
					x, y := order[0], order[1]
					applyVectorOrScalar(dt, op, got, x, y, false)
					applyScalar(dt, op, want, x, y)
					if i, ok := agreesWithScalar(dt, op, got, want, x, y); !ok {
						t.Fatalf("%v %v: %x ⊕ %x = %x, scalar %x", dt, op,
							x[2*i:2*i+2], y[2*i:2*i+2], got[2*i:2*i+2], want[2*i:2*i+2])
					}
				}
			}
			// Every encoding against every other one shifted by a
			// stride, so that pairs of unrelated values meet too.
			for _, stride := range []int{1, 257, 0x7e00, 0x8000} {
				for i := range n {
					binary.LittleEndian.PutUint16(b[2*i:], uint16(i+stride))
				}
				applyVectorOrScalar(dt, op, got, a, b, false)
				applyScalar(dt, op, want, a, b)
				if i, ok := agreesWithScalar(dt, op, got, want, a, b); !ok {
					t.Fatalf("%v %v: %x ⊕ %x = %x, scalar %x", dt, op,
						a[2*i:2*i+2], b[2*i:2*i+2], got[2*i:2*i+2], want[2*i:2*i+2])
				}
			}
		}
	}
}

// TestVectorLarge runs Apply itself above the size from which it uses
// non-temporal stores, disjoint and in place, so that its own choice of
// stores and the alignment of dst are exercised.
func TestVectorLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large buffers")
	}
	const size = 4<<20 + 100
	r := rand.New(rand.NewPCG(13, 14))
	for _, dt := range []DType{Float32, BFloat16, Int64} {
		a, b := randomOperands(r, dt, size/dt.Size())
		want := make([]byte, len(a))
		applyScalar(dt, Max, want, a, b)
		for _, p := range []placement{placements[0], placements[1], placements[4]} {
			got := p.run(dt, Max, a, b, Apply)
			if i, ok := agreesWithScalar(dt, Max, got, want, a, b); !ok {
				t.Errorf("%v %s: element %d differs from the scalar kernel's", dt, p.name, i)
			}
		}
	}
}

// TestVectorFallback runs Apply with the vector kernels switched off, and
// on amd64 with F16C switched off, so that the scalar paths that other
// machines take are exercised on this one too, and checks that the
// dispatch takes them.
func TestVectorFallback(t *testing.T) {
	detected := isa
	defer func() { isa = detected }()
	r := rand.New(rand.NewPCG(15, 16))
	tests := []struct {
		name string
		isa  vectorISA
	}{
		{"scalar", vectorISA{}},
		{"no F16C", vectorISA{avx2: detected.avx2}},
		{"detected", detected},
	}
	for _, tt := range tests {
		isa = tt.isa
		for _, dt := range allDTypes {
			for _, op := range allOps {
				a, b := randomOperands(r, dt, 301)
				dst := make([]byte, len(a))
				used := applyVector(dt, op, dst, a, b)
				if used && !tt.isa.avx2 {
					t.Errorf("%s: %v %v: vector kernel used", tt.name, dt, op)
				}
				if used && !tt.isa.f16c && dt == Float16 && op != Min && op != Max {
					t.Errorf("%s: %v %v: F16C kernel used", tt.name, dt, op)
				}
				want := refApply(dt, op, a, b)
				for _, l := range layouts {
					got := l.run(dt, op, a, b)
					if i, ok := sameResult(dt, op, got, want); !ok {
						t.Fatalf("%s: %v %v %s: element %d differs from the reference", tt.name, dt, op, l.name, i)
					}
				}
			}
		}
	}
	if detected.avx2 && !applyVector(Float32, Sum, make([]byte, 64), make([]byte, 64), make([]byte, 64)) {
		t.Error("AVX2 detected but float32 Sum has no vector kernel")
	}
}

// FuzzSIMD compares the vector path with the scalar twin on arbitrary
// operands: the type, operator and placement come from the first
// arguments, the operands are the two halves of data.
func FuzzSIMD(f *testing.F) {
	nan32 := []byte{0x01, 0x00, 0x80, 0x7f, 0x34, 0x12, 0xc0, 0xff}
	f.Add(uint8(Float32), uint8(Min), uint8(0), false, bytes.Repeat(nan32, 9))
	f.Add(uint8(Float32), uint8(Max), uint8(1), true, bytes.Repeat([]byte{0, 0, 0, 0x80, 0, 0, 0, 0}, 20))
	f.Add(uint8(Float16), uint8(Sum), uint8(2), false, bytes.Repeat([]byte{0xff, 0x7b, 0x00, 0x4c, 0x01, 0x7c}, 30))
	f.Add(uint8(BFloat16), uint8(Sum), uint8(3), true, bytes.Repeat([]byte{0x81, 0x3f, 0x80, 0x3b, 0x81, 0x7f}, 30))
	f.Add(uint8(Float64), uint8(Prod), uint8(4), false, bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 0xff}, 20))
	f.Add(uint8(Int32), uint8(Max), uint8(5), false, bytes.Repeat([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0x80}, 20))
	f.Add(uint8(Uint8), uint8(Min), uint8(1), true, bytes.Repeat([]byte{0x80, 0x7f, 0xff, 0}, 40))
	f.Fuzz(func(t *testing.T, dtByte, opByte, place uint8, nt bool, data []byte) {
		dt := allDTypes[int(dtByte)%len(allDTypes)]
		op := allOps[int(opByte)%len(allOps)]
		p := placements[int(place)%len(placements)]
		sz := dt.Size()
		n := len(data) / 2 / sz * sz
		a, b := data[:n], data[n:2*n]
		want := make([]byte, n)
		applyScalar(dt, op, want, a, b)
		got := p.run(dt, op, a, b, func(dt DType, op Op, dst, a, b []byte) {
			applyVectorOrScalar(dt, op, dst, a, b, nt)
		})
		if i, ok := agreesWithScalar(dt, op, got, want, a, b); !ok {
			t.Fatalf("%v %v %s nt=%v: element %d: %x ⊕ %x = %x, scalar %x", dt, op, p.name, nt, i,
				a[i*sz:(i+1)*sz], b[i*sz:(i+1)*sz], got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz])
		}
	})
}
