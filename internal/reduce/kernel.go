package reduce

import (
	"math"
	"runtime"
	"unsafe"
)

// Apply computes dst[i] = a[i] ⊕ b[i] element-wise, where the elements are
// values of type dt stored little-endian in the byte slices and ⊕ is op
// (Avg reduces as Sum). The semantics per type are in the package
// documentation.
//
// Preconditions, trusted because only this module's packages call Apply:
// dt and op are valid (see ValidPair), len(dst) == len(a) == len(b), and
// the length is a multiple of dt.Size(). dst may be exactly a or exactly b
// (the same slice) or disjoint from both; any other overlap gives
// unspecified results. Apply does not allocate.
func Apply(dt DType, op Op, dst, a, b []byte) {
	if !nativeOK(dt, dst, a, b) {
		applyPortable(dt, op, dst, a, b)
		return
	}
	applyNative(dt, op, dst, a, b)
}

// DivN divides every element of buf, a slice of little-endian values of
// type dt, by n in place: the last step of an Avg reduction over n ranks.
// Integers use Go's truncating division. Float32 and Float64 divide by
// float32(n) and float64(n); Float16 and BFloat16 divide in float32 and
// round the quotient once.
//
// Preconditions as for Apply: dt is valid, len(buf) is a multiple of
// dt.Size(), and n >= 1.
func DivN(dt DType, buf []byte, n int) {
	if !nativeOK(dt, buf, buf, buf) {
		divPortable(dt, buf, n)
		return
	}
	divNative(dt, buf, n)
}

// ValidPair reports whether Apply supports the pair (dt, op). Every valid
// type works with every valid operator.
func ValidPair(dt DType, op Op) bool { return dt.Valid() && op.Valid() }

// The kernels read the byte slices as slices of native machine words. That
// needs a little-endian machine and, unless the architecture tolerates
// unaligned loads and stores, suitably aligned slices; anywhere else the
// portable path bounces the data through aligned, byte-swapped scratch.
const (
	// bigEndian lists the big-endian architectures Go knows of.
	bigEndian = runtime.GOARCH == "armbe" || runtime.GOARCH == "arm64be" ||
		runtime.GOARCH == "mips" || runtime.GOARCH == "mips64" ||
		runtime.GOARCH == "mips64p32" || runtime.GOARCH == "ppc" ||
		runtime.GOARCH == "ppc64" || runtime.GOARCH == "s390" ||
		runtime.GOARCH == "s390x" || runtime.GOARCH == "sparc" ||
		runtime.GOARCH == "sparc64"

	// unalignedOK lists architectures whose ordinary loads and stores
	// accept any address at full or near-full speed.
	unalignedOK = runtime.GOARCH == "amd64" || runtime.GOARCH == "386" ||
		runtime.GOARCH == "arm64" || runtime.GOARCH == "ppc64le" ||
		runtime.GOARCH == "ppc64" || runtime.GOARCH == "s390x"
)

// nativeOK reports whether the native kernels may work on the slices in
// place. On amd64 and arm64 it is the constant true.
func nativeOK(dt DType, dst, a, b []byte) bool {
	if bigEndian {
		return false
	}
	if unalignedOK {
		return true
	}
	mask := uintptr(dt.Size() - 1)
	return (addr(dst)|addr(a)|addr(b))&mask == 0
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// view reinterprets b as a slice of T. The caller guarantees that len(b) is
// a multiple of the size of T and that the platform accepts b's alignment.
func view[T any](b []byte) []T {
	if len(b) == 0 {
		return nil // an empty slice may point just past its array
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))/unsafe.Sizeof(zero))
}

// applyNative is Apply on a little-endian machine with acceptable
// alignment: the vector kernels where the CPU has them (applyVector), the
// scalar ones otherwise and for what the vector kernels leave over.
func applyNative(dt DType, op Op, dst, a, b []byte) {
	if !applyVector(dt, op, dst, a, b) {
		applyScalar(dt, op, dst, a, b)
	}
}

// applyScalar is the scalar twin of the vector kernels, in portable Go,
// with the same preconditions and the same results bit for bit (up to
// the payloads of NaNs from Sum and Prod). Dispatch costs two switches per
// call, one on the type and one on the operator; the loops below run with
// no further dispatch.
func applyScalar(dt DType, op Op, dst, a, b []byte) {
	switch dt {
	case Int8:
		applyInt(op, view[int8](dst), view[int8](a), view[int8](b))
	case Uint8:
		applyInt(op, dst, a, b)
	case Int32:
		applyInt(op, view[int32](dst), view[int32](a), view[int32](b))
	case Uint32:
		applyInt(op, view[uint32](dst), view[uint32](a), view[uint32](b))
	case Int64:
		applyInt(op, view[int64](dst), view[int64](a), view[int64](b))
	case Uint64:
		applyInt(op, view[uint64](dst), view[uint64](a), view[uint64](b))
	case Float16:
		applyF16(op, view[uint16](dst), view[uint16](a), view[uint16](b))
	case BFloat16:
		applyBF16(op, view[uint16](dst), view[uint16](a), view[uint16](b))
	case Float32:
		applyFloat(op, view[float32](dst), view[float32](a), view[float32](b),
			math.Float32frombits(f32NaN))
	case Float64:
		applyFloat(op, view[float64](dst), view[float64](a), view[float64](b),
			math.Float64frombits(f64NaN))
	}
}

type integer interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64
}

type float interface{ ~float32 | ~float64 }

type number interface{ integer | float }

func applyInt[T integer](op Op, d, x, y []T) {
	switch op {
	case Sum, Avg:
		add(d, x, y)
	case Prod:
		mul(d, x, y)
	case Min:
		minInt(d, x, y)
	case Max:
		maxInt(d, x, y)
	}
}

func applyFloat[T float](op Op, d, x, y []T, nan T) {
	switch op {
	case Sum, Avg:
		add(d, x, y)
	case Prod:
		mul(d, x, y)
	case Min:
		minFloat(d, x, y, nan)
	case Max:
		maxFloat(d, x, y, nan)
	}
}

// add sets d[i] = x[i] + y[i]; integers wrap around.
//
// The loop is unrolled four times: a scalar loop this small runs at one
// element per cycle at best, and the unrolled body measured steadier,
// less at the mercy of where the loop happens to sit in memory.
func add[T number](d, x, y []T) {
	x, y = x[:len(d)], y[:len(d)]
	i := 0
	for ; len(d)-i >= 4; i += 4 {
		dd, xx, yy := d[i:i+4:i+4], x[i:i+4:i+4], y[i:i+4:i+4]
		dd[0] = xx[0] + yy[0]
		dd[1] = xx[1] + yy[1]
		dd[2] = xx[2] + yy[2]
		dd[3] = xx[3] + yy[3]
	}
	for ; i < len(d); i++ {
		d[i] = x[i] + y[i]
	}
}

// mul sets d[i] = x[i] * y[i]; integers wrap around.
func mul[T number](d, x, y []T) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = x[i] * y[i]
	}
}

func minInt[T integer](d, x, y []T) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = min(x[i], y[i])
	}
}

func maxInt[T integer](d, x, y []T) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = max(x[i], y[i])
	}
}

// minFloat sets d[i] to the smaller of x[i] and y[i], to nan if either is
// a NaN, and to -0 for a pair of zeros of which one is -0. Equal non-zero
// floats have equal bits, so the result never depends on operand order.
func minFloat[T float](d, x, y []T, nan T) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		xi, yi := x[i], y[i]
		switch {
		case xi < yi:
			d[i] = xi
		case yi < xi:
			d[i] = yi
		case xi == yi:
			if math.Signbit(float64(yi)) {
				d[i] = yi
			} else {
				d[i] = xi
			}
		default:
			d[i] = nan
		}
	}
}

// maxFloat is minFloat's mirror: the larger value, nan if either is a NaN,
// and +0 for a pair of zeros of which one is +0.
func maxFloat[T float](d, x, y []T, nan T) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		xi, yi := x[i], y[i]
		switch {
		case xi > yi:
			d[i] = xi
		case yi > xi:
			d[i] = yi
		case xi == yi:
			if math.Signbit(float64(yi)) {
				d[i] = xi
			} else {
				d[i] = yi
			}
		default:
			d[i] = nan
		}
	}
}

// applyF16 and applyBF16 work on binary16 and bfloat16. Sum and Prod go
// through float32 and round once; Min and Max compare the encodings
// directly and return one operand's bits or the canonical NaN.
func applyF16(op Op, d, x, y []uint16) {
	x, y = x[:len(d)], y[:len(d)]
	switch op {
	case Sum, Avg:
		for i := range d {
			d[i] = F16FromF32(F16ToF32(x[i]) + F16ToF32(y[i]))
		}
	case Prod:
		for i := range d {
			d[i] = F16FromF32(F16ToF32(x[i]) * F16ToF32(y[i]))
		}
	case Min:
		minHalf(d, x, y, f16ExpMask, f16NaN)
	case Max:
		maxHalf(d, x, y, f16ExpMask, f16NaN)
	}
}

func applyBF16(op Op, d, x, y []uint16) {
	x, y = x[:len(d)], y[:len(d)]
	switch op {
	case Sum, Avg:
		for i := range d {
			d[i] = BF16FromF32(BF16ToF32(x[i]) + BF16ToF32(y[i]))
		}
	case Prod:
		for i := range d {
			d[i] = BF16FromF32(BF16ToF32(x[i]) * BF16ToF32(y[i]))
		}
	case Min:
		minHalf(d, x, y, bf16ExpMask, bf16NaN)
	case Max:
		maxHalf(d, x, y, bf16ExpMask, bf16NaN)
	}
}

// halfKey maps the sign-magnitude encoding h of a non-NaN 16-bit float to
// an integer with the same order as the values, both zeros mapping to 0.
func halfKey(h uint16) int32 {
	m := int32(h &^ 0x8000)
	if h&0x8000 != 0 {
		return -m
	}
	return m
}

// minHalf is minFloat for 16-bit encodings whose +Inf (equal to the
// exponent mask) is inf: a NaN is any magnitude above it.
func minHalf(d, x, y []uint16, inf, nan uint16) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		xi, yi := x[i], y[i]
		if xi&^0x8000 > inf || yi&^0x8000 > inf {
			d[i] = nan
			continue
		}
		kx, ky := halfKey(xi), halfKey(yi)
		switch {
		case kx < ky:
			d[i] = xi
		case ky < kx:
			d[i] = yi
		default:
			d[i] = xi | yi // identical bits, or ±0 where the sign bit wins
		}
	}
}

// maxHalf is minHalf's mirror.
func maxHalf(d, x, y []uint16, inf, nan uint16) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		xi, yi := x[i], y[i]
		if xi&^0x8000 > inf || yi&^0x8000 > inf {
			d[i] = nan
			continue
		}
		kx, ky := halfKey(xi), halfKey(yi)
		switch {
		case kx > ky:
			d[i] = xi
		case ky > kx:
			d[i] = yi
		default:
			d[i] = xi & yi // identical bits, or ±0 where +0 wins
		}
	}
}

// divNative is DivN on a little-endian machine with acceptable alignment.
func divNative(dt DType, buf []byte, n int) {
	switch dt {
	case Int8:
		divInt(view[int8](buf), int64(n))
	case Uint8:
		divUint(buf, uint64(n))
	case Int32:
		divInt(view[int32](buf), int64(n))
	case Uint32:
		divUint(view[uint32](buf), uint64(n))
	case Int64:
		divInt(view[int64](buf), int64(n))
	case Uint64:
		divUint(view[uint64](buf), uint64(n))
	case Float16:
		v, nf := view[uint16](buf), float32(n)
		for i := range v {
			v[i] = F16FromF32(F16ToF32(v[i]) / nf)
		}
	case BFloat16:
		v, nf := view[uint16](buf), float32(n)
		for i := range v {
			v[i] = BF16FromF32(BF16ToF32(v[i]) / nf)
		}
	case Float32:
		divFloat(view[float32](buf), float32(n))
	case Float64:
		divFloat(view[float64](buf), float64(n))
	}
}

// divInt divides in int64 so that a divisor beyond T's range still gives
// the truncated quotient (zero) rather than dividing by a wrapped value.
func divInt[T ~int8 | ~int32 | ~int64](v []T, n int64) {
	for i := range v {
		v[i] = T(int64(v[i]) / n)
	}
}

func divUint[T ~uint8 | ~uint32 | ~uint64](v []T, n uint64) {
	for i := range v {
		v[i] = T(uint64(v[i]) / n)
	}
}

func divFloat[T float](v []T, n T) {
	for i := range v {
		v[i] /= n
	}
}
