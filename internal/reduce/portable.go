package reduce

import (
	"math/bits"
	"unsafe"
)

// scratchWords is the size of the portable path's bounce buffers in 8-byte
// words. 512 bytes is a multiple of every element size.
const scratchWords = 64

// applyPortable is Apply for machines where the native kernels cannot work
// on the slices in place: big-endian ones, and ones that fault on the
// unaligned slices given. It copies a chunk of each operand into aligned
// stack buffers, converts them to native byte order, runs the native
// kernel, and writes the result back. Both operands of a chunk are copied
// before its result is stored, so dst may alias a or b as Apply allows.
func applyPortable(dt DType, op Op, dst, a, b []byte) {
	var sd, sa, sb [scratchWords]uint64
	bd, ba, bb := wordBytes(&sd), wordBytes(&sa), wordBytes(&sb)
	for len(dst) > 0 {
		n := min(len(dst), len(bd))
		copy(ba, a[:n])
		copy(bb, b[:n])
		swapOrder(dt, ba[:n])
		swapOrder(dt, bb[:n])
		applyNative(dt, op, bd[:n], ba[:n], bb[:n])
		swapOrder(dt, bd[:n])
		copy(dst, bd[:n])
		dst, a, b = dst[n:], a[n:], b[n:]
	}
}

// divPortable is DivN's counterpart of applyPortable.
func divPortable(dt DType, buf []byte, n int) {
	var s [scratchWords]uint64
	bs := wordBytes(&s)
	for len(buf) > 0 {
		k := min(len(buf), len(bs))
		copy(bs, buf[:k])
		swapOrder(dt, bs[:k])
		divNative(dt, bs[:k], n)
		swapOrder(dt, bs[:k])
		copy(buf, bs[:k])
		buf = buf[k:]
	}
}

// wordBytes returns the bytes of w, aligned for every element type.
func wordBytes(w *[scratchWords]uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(w)), len(w)*8)
}

// swapOrder converts aligned elements of type dt between little-endian and
// native byte order, in place. It does nothing on little-endian machines.
func swapOrder(dt DType, b []byte) {
	if !bigEndian {
		return
	}
	switch dt.Size() {
	case 2:
		v := view[uint16](b)
		for i := range v {
			v[i] = bits.ReverseBytes16(v[i])
		}
	case 4:
		v := view[uint32](b)
		for i := range v {
			v[i] = bits.ReverseBytes32(v[i])
		}
	case 8:
		v := view[uint64](b)
		for i := range v {
			v[i] = bits.ReverseBytes64(v[i])
		}
	}
}
