//go:build !purego

package reduce

import "unsafe"

// copyNT copies n bytes, a multiple of 32, from src to dst (aligned to 32
// bytes) with non-temporal stores.
//
//go:noescape
func copyNT(dst, src *byte, n int)

// copyVectorNT copies src into dst with non-temporal stores and reports
// true, or does nothing and reports false when the CPU lacks AVX2.
func copyVectorNT(dst, src []byte) bool {
	if !isa.avx2 {
		return false
	}
	head := min(int(-addr(dst)&(vecBytes-1)), len(dst))
	copy(dst[:head], src[:head])
	n := (len(dst) - head) &^ (vecBytes - 1)
	if n > 0 {
		copyNT(unsafe.SliceData(dst[head:]), unsafe.SliceData(src[head:]), n)
	}
	copy(dst[head+n:], src[head+n:])
	return true
}
