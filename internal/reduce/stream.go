package reduce

// StreamMin is the size of a destination region, in bytes, from which
// writing it around the caches pays: a region this large, written in
// order and not read again at once, would only push the operands and
// whatever the peers read next out of the caches, and non-temporal
// stores save reading each of its lines before overwriting it. Measured
// on a machine with 2 MiB of L2 per core and 32 MiB of L3, plain and
// non-temporal stores break even at about 4 MiB.
const StreamMin = 4 << 20

// ApplyStream is Apply for a dst that is one piece of a larger region the
// caller fills in order and will not read again soon (a large message
// received piece by piece): the vector kernels write it with non-temporal
// stores whatever the piece's length. The result is Apply's, bit for bit.
func ApplyStream(dt DType, op Op, dst, a, b []byte) {
	if !nativeOK(dt, dst, a, b) {
		applyPortable(dt, op, dst, a, b)
		return
	}
	nt := addr(dst) != addr(a) && addr(dst) != addr(b)
	if !applyVectorNT(dt, op, dst, a, b, nt) {
		applyScalar(dt, op, dst, a, b)
	}
}

// CopyStream copies src into dst, as copy does, for a dst that is one
// piece of a larger region filled in order and not read again soon: where
// the CPU allows it writes around the caches with non-temporal stores.
// It returns the number of bytes copied, min(len(dst), len(src)).
func CopyStream(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < vecBytes || !copyVectorNT(dst[:n], src[:n]) {
		return copy(dst, src)
	}
	return n
}
