package reduce

import (
	"math"
	"math/rand/v2"
	"testing"
)

type halfConv struct {
	f     *halfFormat
	from  func(float32) uint16
	to    func(uint16) float32
	quiet uint16
}

var halfConvs = []halfConv{
	{refF16, F16FromF32, F16ToF32, f16QuietBit},
	{refBF16, BF16FromF32, BF16ToF32, bf16QuietBit},
}

// TestHalfRoundTrip checks every 16-bit encoding of both formats: it
// widens to the value the format's definition gives, and narrows back to
// itself (a NaN to a quiet NaN of the same sign and payload).
func TestHalfRoundTrip(t *testing.T) {
	for _, c := range halfConvs {
		t.Run(c.f.name, func(t *testing.T) {
			for i := range 1 << 16 {
				h := uint16(i)
				w := c.to(h)
				if c.f.isNaN(h) {
					if w == w {
						t.Fatalf("to(%#04x) = %v, want NaN", h, w)
					}
					if math.Float32bits(w)>>31 != uint32(h>>15) {
						t.Fatalf("to(%#04x) = %#08x: sign lost", h, math.Float32bits(w))
					}
					if back := c.from(w); back != h|c.quiet {
						t.Fatalf("from(to(%#04x)) = %#04x, want %#04x", h, back, h|c.quiet)
					}
					continue
				}
				want := c.f.value(h)
				if float64(w) != want || math.Signbit(float64(w)) != math.Signbit(want) {
					t.Fatalf("to(%#04x) = %v, want %v", h, w, want)
				}
				if back := c.from(w); back != h {
					t.Fatalf("from(to(%#04x)) = %#04x", h, back)
				}
			}
		})
	}
}

func TestF16FromF32Cases(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"plus zero", 0, 0x0000},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"max finite", 65504, 0x7bff},
		{"below overflow tie", 65519.996, 0x7bff},
		{"overflow tie", 65520, 0x7c00},
		{"past overflow", 70000, 0x7c00},
		{"float32 max", math.MaxFloat32, 0x7c00},
		{"minus overflow", -65520, 0xfc00},
		{"inf", float32(math.Inf(1)), 0x7c00},
		{"minus inf", float32(math.Inf(-1)), 0xfc00},
		{"tie to even down", 1 + 0x1p-11, 0x3c00},
		{"tie to even up", 1 + 3*0x1p-11, 0x3c02},
		{"above tie", 1 + 0x1p-11 + 0x1p-23, 0x3c01},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half smallest subnormal ties to zero", 0x1p-25, 0x0000},
		{"just above half smallest subnormal", math.Nextafter32(0x1p-25, 1), 0x0001},
		{"one and a half smallest subnormal ties up", 3 * 0x1p-25, 0x0002},
		{"largest subnormal", 1023 * 0x1p-24, 0x03ff},
		{"rounds up to smallest normal", 0x1p-14 - 0x1p-26, 0x0400},
		{"smallest normal", 0x1p-14, 0x0400},
		{"float32 subnormal", 0x1p-140, 0x0000},
		{"minus float32 subnormal", -0x1p-140, 0x8000},
		{"quiet NaN", math.Float32frombits(0x7fc00000), 0x7e00},
		{"signalling NaN keeps payload and quiets", math.Float32frombits(0x7f802000), 0x7e01},
		{"signalling NaN with low payload only", math.Float32frombits(0x7f800001), 0x7e00},
		{"negative NaN", math.Float32frombits(0xffc00000), 0xfe00},
	}
	for _, tt := range tests {
		if got := F16FromF32(tt.in); got != tt.want {
			t.Errorf("%s: F16FromF32(%g) = %#04x, want %#04x", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestBF16FromF32Cases(t *testing.T) {
	tests := []struct {
		name string
		in   uint32 // float32 bits
		want uint16
	}{
		{"one", 0x3f800000, 0x3f80},
		{"tie to even down", 0x3f808000, 0x3f80},
		{"tie to even up", 0x3f818000, 0x3f82},
		{"above tie", 0x3f808001, 0x3f81},
		{"below tie", 0x3f807fff, 0x3f80},
		{"float32 max overflows", 0x7f7fffff, 0x7f80},
		{"largest that stays finite", 0x7f7f7fff, 0x7f7f},
		{"overflow tie", 0x7f7f8000, 0x7f80},
		{"minus overflow", 0xff7f8000, 0xff80},
		{"inf", 0x7f800000, 0x7f80},
		{"subnormal tie to even", 0x00018000, 0x0002},
		{"NaN with only low payload stays NaN", 0x7f800001, 0x7fc0},
		{"NaN that would round up stays NaN", 0x7fffffff, 0x7fff},
		{"negative NaN", 0xff800001, 0xffc0},
		{"minus zero", 0x80000000, 0x8000},
	}
	for _, tt := range tests {
		if got := BF16FromF32(math.Float32frombits(tt.in)); got != tt.want {
			t.Errorf("%s: BF16FromF32(%#08x) = %#04x, want %#04x", tt.name, tt.in, got, tt.want)
		}
	}
}

// halfRoundingInputs returns float32 inputs that probe the rounding of
// format f: every midpoint between neighbouring encodings and the floats
// next to it, every representable value, and random float32 bit patterns.
func halfRoundingInputs(f *halfFormat, random int) []float32 {
	var in []float32
	p := f.positives
	for i := 1; i < len(p); i++ {
		mid := float32((p[i-1] + p[i]) / 2) // exact in float32
		for _, v := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))), float32(p[i-1])} {
			in = append(in, v, -v)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range random {
		in = append(in, math.Float32frombits(r.Uint32()))
	}
	return in
}

func TestHalfRounding(t *testing.T) {
	random := 1 << 20
	if testing.Short() {
		random = 1 << 14
	}
	for _, c := range halfConvs {
		t.Run(c.f.name, func(t *testing.T) {
			fails := 0
			for _, x := range halfRoundingInputs(c.f, random) {
				if x != x {
					continue // NaNs are covered by the round-trip and case tests
				}
				got, want := c.from(x), c.f.round(float64(x))
				if got != want {
					t.Errorf("from(%g [%#08x]) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
					if fails++; fails == 10 {
						t.Fatal("too many failures")
					}
				}
			}
		})
	}
}

// FuzzHalf checks both conversions of an arbitrary float32 against the
// search-based reference, and that narrowing then widening is idempotent.
func FuzzHalf(f *testing.F) {
	for _, seed := range []uint32{0, 0x80000000, 0x3f800000, 0x477fe000, 0x477ff000, 0x33000000,
		0x33000001, 0x38800000, 0x7f7fffff, 0x7f800000, 0x7f800001, 0x7fffffff, 0xff7f8000, 0x00018000} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		x := math.Float32frombits(bits)
		for _, c := range halfConvs {
			h := c.from(x)
			if x != x {
				if !c.f.isNaN(h) || h&c.quiet == 0 || h>>15 != uint16(bits>>31) {
					t.Fatalf("%s: from(NaN %#08x) = %#04x, want quiet NaN of the same sign", c.f.name, bits, h)
				}
				continue
			}
			if want := c.f.round(float64(x)); h != want {
				t.Fatalf("%s: from(%g [%#08x]) = %#04x, want %#04x", c.f.name, x, bits, h, want)
			}
			if again := c.from(c.to(h)); again != h {
				t.Fatalf("%s: from(to(%#04x)) = %#04x", c.f.name, h, again)
			}
		}
	})
}
