package hcomm

import "testing"

type (
	namedF32 float32
	namedI8  int8
	namedU64 uint64
)

// TestDTypeOf: every element type, predeclared or named, maps to its
// DType without allocating.
func TestDTypeOf(t *testing.T) {
	for _, tc := range []struct {
		got, want DType
	}{
		{DTypeOf[int8](), DTypeInt8},
		{DTypeOf[uint8](), DTypeUint8},
		{DTypeOf[int32](), DTypeInt32},
		{DTypeOf[uint32](), DTypeUint32},
		{DTypeOf[int64](), DTypeInt64},
		{DTypeOf[uint64](), DTypeUint64},
		{DTypeOf[float32](), DTypeFloat32},
		{DTypeOf[float64](), DTypeFloat64},
		{DTypeOf[Float16](), DTypeFloat16},
		{DTypeOf[BFloat16](), DTypeBFloat16},
		{DTypeOf[namedF32](), DTypeFloat32},
		{DTypeOf[namedI8](), DTypeInt8},
		{DTypeOf[namedU64](), DTypeUint64},
	} {
		if tc.got != tc.want {
			t.Errorf("DTypeOf gave %v, want %v", tc.got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		_ = DTypeOf[float32]() + DTypeOf[BFloat16]() + DTypeOf[namedF32]()
	}); n != 0 {
		t.Errorf("DTypeOf allocates %.1f times", n)
	}
}
