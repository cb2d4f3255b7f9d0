//go:build !purego

package reduce

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run gen_simd.go

// detectISA reports the vector instruction sets this CPU and OS support.
func detectISA() vectorISA {
	return vectorISA{
		avx2: cpu.X86.HasAVX2,
		f16c: cpu.X86.HasAVX2 && cpu.X86.HasF16C,
	}
}

// ntMin is the length of dst in bytes from which the vector kernels write
// it with non-temporal stores, as memmove does for large copies. Three
// streams of this size crowd the caches, and going around them saves
// reading each line of dst before overwriting it; below it, keeping the
// result in the caches for whoever reads it next pays more. Measured on a
// machine with 2 MiB of L2 per core and 32 MiB of L3, the two break even
// at about 4 MiB (StreamMin). Non-temporal stores are not used when dst
// is an operand: its lines are then in the cache already.
const ntMin = StreamMin

// vkernel names a generated vector kernel (see gen_simd.go).
type vkernel uint8

const (
	kNone vkernel = iota
	kAddB
	kAddD
	kAddQ
	kMulD
	kMinSB
	kMaxSB
	kMinUB
	kMaxUB
	kMinSD
	kMaxSD
	kMinUD
	kMaxUD
	kAddF32
	kMulF32
	kAddF64
	kMulF64
	kMinF32
	kMaxF32
	kMinF64
	kMaxF64
	kMinF16
	kMaxF16
	kMinBF16
	kMaxBF16
	kAddF16
	kMulF16
	kAddBF16
	kMulBF16
)

// vkernels maps a type and an operator to its vector kernel, kNone where
// AVX2 has no fitting instructions (8-bit Prod; 64-bit Prod, Min and Max)
// and the scalar kernels do all the work. Avg reduces as Sum.
var vkernels = [numDTypes][numOps]vkernel{
	Int8:     {Sum: kAddB, Avg: kAddB, Min: kMinSB, Max: kMaxSB},
	Uint8:    {Sum: kAddB, Avg: kAddB, Min: kMinUB, Max: kMaxUB},
	Int32:    {Sum: kAddD, Avg: kAddD, Prod: kMulD, Min: kMinSD, Max: kMaxSD},
	Uint32:   {Sum: kAddD, Avg: kAddD, Prod: kMulD, Min: kMinUD, Max: kMaxUD},
	Int64:    {Sum: kAddQ, Avg: kAddQ},
	Uint64:   {Sum: kAddQ, Avg: kAddQ},
	Float16:  {Sum: kAddF16, Avg: kAddF16, Prod: kMulF16, Min: kMinF16, Max: kMaxF16},
	BFloat16: {Sum: kAddBF16, Avg: kAddBF16, Prod: kMulBF16, Min: kMinBF16, Max: kMaxBF16},
	Float32:  {Sum: kAddF32, Avg: kAddF32, Prod: kMulF32, Min: kMinF32, Max: kMaxF32},
	Float64:  {Sum: kAddF64, Avg: kAddF64, Prod: kMulF64, Min: kMinF64, Max: kMaxF64},
}

// applyVector runs Apply's vector kernel for (dt, op) over the whole
// vectors of the slices and the scalar kernel over the rest, and reports
// true; it reports false, having done nothing, if there is no vector
// kernel for the pair on this CPU. The preconditions are Apply's.
func applyVector(dt DType, op Op, dst, a, b []byte) bool {
	nt := len(dst) >= ntMin && addr(dst) != addr(a) && addr(dst) != addr(b)
	return applyVectorNT(dt, op, dst, a, b, nt)
}

// applyVectorNT is applyVector with the choice of stores made: with nt
// set it writes dst with non-temporal stores, if dst's alignment allows.
func applyVectorNT(dt DType, op Op, dst, a, b []byte, nt bool) bool {
	k := vkernels[dt][op]
	switch {
	case !isa.avx2 || k == kNone:
		return false
	case (k == kAddF16 || k == kMulF16) && !isa.f16c:
		return false
	}
	if nt && len(dst) >= vecBytes && addr(dst)%uintptr(dt.Size()) == 0 {
		// Non-temporal stores need dst aligned to a vector; the scalar
		// kernel takes the elements before the first aligned one.
		head := int(-addr(dst) & (vecBytes - 1))
		applyScalar(dt, op, dst[:head], a[:head], b[:head])
		dst, a, b = dst[head:], a[head:], b[head:]
	} else {
		nt = false
	}
	n := len(dst) &^ (vecBytes - 1)
	if n > 0 {
		runVector(k, unsafe.SliceData(dst), unsafe.SliceData(a), unsafe.SliceData(b), n, nt)
	}
	if n < len(dst) {
		applyScalar(dt, op, dst[n:], a[n:], b[n:])
	}
	return true
}

// runVector calls kernel k. The calls are direct so that escape analysis
// sees the kernels' //go:noescape and callers' buffers stay where they are.
func runVector(k vkernel, d, x, y *byte, n int, nt bool) {
	switch k {
	case kAddB:
		vaddB(d, x, y, n, nt)
	case kAddD:
		vaddD(d, x, y, n, nt)
	case kAddQ:
		vaddQ(d, x, y, n, nt)
	case kMulD:
		vmulD(d, x, y, n, nt)
	case kMinSB:
		vminSB(d, x, y, n, nt)
	case kMaxSB:
		vmaxSB(d, x, y, n, nt)
	case kMinUB:
		vminUB(d, x, y, n, nt)
	case kMaxUB:
		vmaxUB(d, x, y, n, nt)
	case kMinSD:
		vminSD(d, x, y, n, nt)
	case kMaxSD:
		vmaxSD(d, x, y, n, nt)
	case kMinUD:
		vminUD(d, x, y, n, nt)
	case kMaxUD:
		vmaxUD(d, x, y, n, nt)
	case kAddF32:
		vaddF32(d, x, y, n, nt)
	case kMulF32:
		vmulF32(d, x, y, n, nt)
	case kAddF64:
		vaddF64(d, x, y, n, nt)
	case kMulF64:
		vmulF64(d, x, y, n, nt)
	case kMinF32:
		vminF32(d, x, y, n, nt)
	case kMaxF32:
		vmaxF32(d, x, y, n, nt)
	case kMinF64:
		vminF64(d, x, y, n, nt)
	case kMaxF64:
		vmaxF64(d, x, y, n, nt)
	case kMinF16:
		vminF16(d, x, y, n, nt)
	case kMaxF16:
		vmaxF16(d, x, y, n, nt)
	case kMinBF16:
		vminBF16(d, x, y, n, nt)
	case kMaxBF16:
		vmaxBF16(d, x, y, n, nt)
	case kAddF16:
		vaddF16(d, x, y, n, nt)
	case kMulF16:
		vmulF16(d, x, y, n, nt)
	case kAddBF16:
		vaddBF16(d, x, y, n, nt)
	case kMulBF16:
		vmulBF16(d, x, y, n, nt)
	}
}
