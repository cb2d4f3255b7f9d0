package reduce

import "math"

// IEEE 754 binary16 ("half") layout: 1 sign bit, 5 exponent bits (bias 15),
// 10 mantissa bits. bfloat16 is the upper half of a float32: 1 sign bit,
// 8 exponent bits (bias 127), 7 mantissa bits.
const (
	f16SignMask = 0x8000
	f16ExpMask  = 0x7c00 // also the bits of +Inf
	f16QuietBit = 0x0200
	f16NaN      = 0x7e00 // canonical quiet NaN

	bf16ExpMask  = 0x7f80 // also the bits of +Inf
	bf16QuietBit = 0x0040
	bf16NaN      = 0x7fc0 // canonical quiet NaN

	f32NaN = 0x7fc00000         // canonical quiet NaN
	f64NaN = 0x7ff8000000000000 // canonical quiet NaN
)

// F16FromF32 converts f to the nearest IEEE 754 binary16 value, rounding
// ties to even. Values too small for the smallest subnormal round to a
// signed zero, values of magnitude 65520 or more become a signed infinity,
// and a NaN stays a quiet NaN keeping the sign and the top bits of its
// payload.
func F16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & f16SignMask
	a := b &^ 0x80000000 // magnitude
	var h uint32
	switch {
	case a < 0x38800000:
		// Below 2^-14, the smallest normal half: the result counts units
		// of 2^-24. Adding 0.5, whose float32 ulp is 2^-24, makes the
		// float32 adder round to that unit, ties to even; the count is
		// then the sum's low mantissa bits (1024 when rounding up to the
		// smallest normal, which is also right).
		h = math.Float32bits(math.Float32frombits(a)+0.5) - 0x3f000000
	case a < 0x47800000:
		// Normal range below 2^16: rebias the exponent and drop 13
		// mantissa bits, adding just under half of the dropped unit, plus
		// one when the kept part is odd, to round to nearest even. A carry
		// out of the mantissa bumps the exponent, up to Inf from 65520 on.
		h = (a - (127-15)<<23 + 0xfff + a>>13&1) >> 13
	case a <= 0x7f800000: // at least 2^16, or Inf
		h = f16ExpMask
	default:
		// NaN: set the quiet bit and keep the top nine payload bits. The
		// quiet bit also stops a NaN whose kept bits are all zero from
		// turning into Inf.
		h = f16ExpMask | f16QuietBit | a>>13&0x1ff
	}
	return sign | uint16(h)
}

// F16ToF32 converts the IEEE 754 binary16 value h to float32. Every value
// converts exactly; a NaN keeps its sign and payload.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&f16SignMask) << 16
	o := uint32(h&^f16SignMask) << 13 // exponent and mantissa in float32 position
	exp := o & (f16ExpMask << 13)
	o += (127 - 15) << 23 // rebias
	switch exp {
	case f16ExpMask << 13: // Inf or NaN: exponent all ones
		o += (128 - 16) << 23
	case 0: // zero or subnormal: treat as 1.m·2^-14, then take away 2^-14
		o += 1 << 23
		return math.Float32frombits(math.Float32bits(math.Float32frombits(o)-0x1p-14) | sign)
	}
	return math.Float32frombits(o | sign)
}

// BF16FromF32 converts f to the nearest bfloat16 value, rounding ties to
// even. Finite values beyond the bfloat16 range round to a signed infinity;
// a NaN stays a quiet NaN keeping the sign and the top bits of its payload
// (it never rounds into an infinity).
func BF16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN
		return uint16(b>>16) | bf16QuietBit
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToF32 converts the bfloat16 value b to float32. Every value, NaNs
// included, converts exactly.
func BF16ToF32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}
