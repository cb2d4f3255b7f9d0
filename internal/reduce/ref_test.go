package reduce

import (
	"encoding/binary"
	"math"
	"sort"
)

// This file holds the tests' independent references: 16-bit float values
// decoded from the format's definition, rounding by searching the sorted
// list of representable values, and element-wise reductions in plain Go.

// halfFormat describes a 16-bit binary float by its field widths.
type halfFormat struct {
	name      string
	expBits   uint
	mantBits  uint
	canonNaN  uint16
	positives []float64 // value of every non-negative encoding up to +Inf, see newHalfFormat
}

func newHalfFormat(name string, expBits, mantBits uint, canonNaN uint16) *halfFormat {
	f := &halfFormat{name: name, expBits: expBits, mantBits: mantBits, canonNaN: canonNaN}
	inf := f.infBits()
	f.positives = make([]float64, inf+1)
	for h := range f.positives {
		f.positives[h] = f.finiteValue(uint16(h))
	}
	// positives[inf] holds 2^(emax+1), the value the encoding would have
	// with an unbounded exponent: finite inputs at or past the midpoint
	// between the largest finite value and it round to +Inf, ties included
	// (+Inf's encoding is even), as IEEE 754 overflow requires.
	return f
}

var (
	refF16  = newHalfFormat("float16", 5, 10, 0x7e00)
	refBF16 = newHalfFormat("bfloat16", 8, 7, 0x7fc0)
)

func (f *halfFormat) infBits() uint16 { return uint16((1<<f.expBits - 1) << f.mantBits) }

func (f *halfFormat) isNaN(h uint16) bool { return h&0x7fff > f.infBits() }

// finiteValue decodes h by the textbook formula, ignoring the Inf/NaN
// meaning of the all-ones exponent.
func (f *halfFormat) finiteValue(h uint16) float64 {
	bias := 1<<(f.expBits-1) - 1
	e := int(h>>f.mantBits) & (1<<f.expBits - 1)
	m := float64(h & (1<<f.mantBits - 1))
	var v float64
	if e == 0 {
		v = math.Ldexp(m, 1-bias-int(f.mantBits))
	} else {
		v = math.Ldexp(m+float64(uint(1)<<f.mantBits), e-bias-int(f.mantBits))
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// value decodes h, NaNs and infinities included.
func (f *halfFormat) value(h uint16) float64 {
	switch {
	case f.isNaN(h):
		return math.NaN()
	case h&0x7fff == f.infBits():
		return math.Inf(1 - 2*int(h>>15))
	}
	return f.finiteValue(h)
}

// round returns the encoding nearest to x, ties to even, found by search.
// NaN gives the canonical NaN.
func (f *halfFormat) round(x float64) uint16 {
	if math.IsNaN(x) {
		return f.canonNaN
	}
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	p := f.positives
	i := sort.SearchFloat64s(p, x) // first index with p[i] >= x
	switch {
	case i == len(p):
		return sign | uint16(len(p)-1)
	case p[i] == x:
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	mid := (p[lo] + p[hi]) / 2 // exact: one more bit than the format has
	switch {
	case x < mid:
		return sign | uint16(lo)
	case x > mid:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

// refApply computes a ⊕ b element-wise for little-endian buffers in plain
// Go arithmetic on typed values.
func refApply(dt DType, op Op, a, b []byte) []byte {
	out := make([]byte, len(a))
	le := binary.LittleEndian
	sz := dt.Size()
	for i := 0; i+sz <= len(a); i += sz {
		x, y, d := a[i:i+sz], b[i:i+sz], out[i:i+sz]
		switch dt {
		case Int8:
			d[0] = byte(refInt(op, int8(x[0]), int8(y[0])))
		case Uint8:
			d[0] = refInt(op, x[0], y[0])
		case Int32:
			le.PutUint32(d, uint32(refInt(op, int32(le.Uint32(x)), int32(le.Uint32(y)))))
		case Uint32:
			le.PutUint32(d, refInt(op, le.Uint32(x), le.Uint32(y)))
		case Int64:
			le.PutUint64(d, uint64(refInt(op, int64(le.Uint64(x)), int64(le.Uint64(y)))))
		case Uint64:
			le.PutUint64(d, refInt(op, le.Uint64(x), le.Uint64(y)))
		case Float32:
			xf, yf := math.Float32frombits(le.Uint32(x)), math.Float32frombits(le.Uint32(y))
			r := refFloat(op, xf, yf)
			bits := math.Float32bits(r)
			if r != r {
				bits = f32NaN
			}
			le.PutUint32(d, bits)
		case Float64:
			xf, yf := math.Float64frombits(le.Uint64(x)), math.Float64frombits(le.Uint64(y))
			r := refFloat(op, xf, yf)
			bits := math.Float64bits(r)
			if r != r {
				bits = f64NaN
			}
			le.PutUint64(d, bits)
		case Float16, BFloat16:
			f := refF16
			if dt == BFloat16 {
				f = refBF16
			}
			le.PutUint16(d, refHalf(f, op, le.Uint16(x), le.Uint16(y)))
		}
	}
	return out
}

func refInt[T int8 | uint8 | int32 | uint32 | int64 | uint64](op Op, x, y T) T {
	switch op {
	case Sum, Avg:
		return x + y
	case Prod:
		return x * y
	case Min:
		if y < x {
			return y
		}
		return x
	case Max:
		if y > x {
			return y
		}
		return x
	}
	panic("bad op")
}

// refFloat returns NaN whenever the result is a NaN; callers compare NaNs
// by class (Sum, Prod) or map them to the canonical NaN (Min, Max).
func refFloat[T float32 | float64](op Op, x, y T) T {
	switch op {
	case Sum, Avg:
		return x + y
	case Prod:
		return x * y
	case Min, Max:
		if x != x || y != y {
			return T(math.NaN())
		}
		if x == 0 && y == 0 { // the sign of zero decides
			neg := math.Signbit(float64(x)) || math.Signbit(float64(y))
			if op == Max {
				neg = math.Signbit(float64(x)) && math.Signbit(float64(y))
			}
			if neg {
				return T(math.Copysign(0, -1))
			}
			return 0
		}
		if (op == Min) == (x < y) {
			return x
		}
		return y
	}
	panic("bad op")
}

// refHalf combines two 16-bit floats exactly (or, for bfloat16 sums,
// rounded to float64, which is harmless) in float64 and rounds the result
// to the format by search: the correctly rounded result.
func refHalf(f *halfFormat, op Op, x, y uint16) uint16 {
	xv, yv := f.value(x), f.value(y)
	switch op {
	case Sum, Avg:
		return f.round(xv + yv)
	case Prod:
		return f.round(xv * yv)
	}
	r := refFloat(op, xv, yv)
	if r != r {
		return f.canonNaN
	}
	if r == 0 {
		return uint16(0x8000 * b2u(math.Signbit(r)))
	}
	if r == xv { // return the operand's own bits
		return x
	}
	return y
}

func b2u(b bool) uint16 {
	if b {
		return 1
	}
	return 0
}
