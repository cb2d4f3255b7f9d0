package hcomm

import (
	"reflect"
	"strconv"

	"github.com/hcomm-go/hcomm/internal/reduce"
)

// DType names an element type for the untyped ([]byte) forms of the
// collectives. The typed forms infer it from the slice's element type.
type DType int

// Element types.
const (
	DTypeInt8     = DType(reduce.Int8)
	DTypeUint8    = DType(reduce.Uint8)
	DTypeInt32    = DType(reduce.Int32)
	DTypeUint32   = DType(reduce.Uint32)
	DTypeInt64    = DType(reduce.Int64)
	DTypeUint64   = DType(reduce.Uint64)
	DTypeFloat16  = DType(reduce.Float16)
	DTypeBFloat16 = DType(reduce.BFloat16)
	DTypeFloat32  = DType(reduce.Float32)
	DTypeFloat64  = DType(reduce.Float64)
)

func (d DType) internal() reduce.DType {
	if d < 0 || d > 255 {
		return 0
	}
	return reduce.DType(d)
}

// Size returns the size of one element in bytes, or 0 for an unknown type.
func (d DType) Size() int { return d.internal().Size() }

// String returns the type's name, such as "float32".
func (d DType) String() string {
	if !d.internal().Valid() {
		return "DType(" + strconv.Itoa(int(d)) + ")"
	}
	return d.internal().String()
}

// Op is a reduction operator.
type Op int

// Reduction operators.
//
// Integer Sum and Prod wrap around on overflow. Avg sums, then divides by
// the number of ranks: on integer types with Go's truncating division (the
// sum may wrap first), on floating-point types exactly as a float division.
//
// Min and Max on floating-point types propagate NaN: if any rank contributes
// a NaN for an element, the result is NaN (the canonical quiet NaN of the
// type, so every rank gets the same bits). They order −0 below +0. Sum and
// Prod follow IEEE 754; a NaN result's payload is not specified.
const (
	Sum  = Op(reduce.Sum)
	Prod = Op(reduce.Prod)
	Min  = Op(reduce.Min)
	Max  = Op(reduce.Max)
	Avg  = Op(reduce.Avg)
)

func (o Op) internal() reduce.Op {
	if o < 0 || o > 255 {
		return 0
	}
	return reduce.Op(o)
}

// String returns the operator's name, such as "sum".
func (o Op) String() string {
	if !o.internal().Valid() {
		return "Op(" + strconv.Itoa(int(o)) + ")"
	}
	return o.internal().String()
}

// Float16 is an IEEE 754 binary16 ("half") value, stored as its bits.
type Float16 uint16

// Float16From converts f to the nearest Float16 (ties to even; values beyond
// the range become ±Inf).
func Float16From(f float32) Float16 { return Float16(reduce.F16FromF32(f)) }

// Float32 returns h as a float32 (exact).
func (h Float16) Float32() float32 { return reduce.F16ToF32(uint16(h)) }

// BFloat16 is a bfloat16 value (the upper half of a float32), stored as its
// bits.
type BFloat16 uint16

// BFloat16From converts f to the nearest BFloat16 (ties to even).
func BFloat16From(f float32) BFloat16 { return BFloat16(reduce.BF16FromF32(f)) }

// Float32 returns b as a float32 (exact).
func (b BFloat16) Float32() float32 { return reduce.BF16ToF32(uint16(b)) }

// Element is the set of element types the collectives accept. Types whose
// underlying type is one of the integer or float types are accepted too;
// Float16 and BFloat16 are accepted by name only.
type Element interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64 | Float16 | BFloat16
}

// DTypeOf returns the DType of T.
func DTypeOf[T Element]() DType {
	// The predeclared types are told apart by a type switch, which costs a
	// few comparisons; only named types over them take reflection.
	var z T
	switch any(z).(type) {
	case float32:
		return DTypeFloat32
	case float64:
		return DTypeFloat64
	case int32:
		return DTypeInt32
	case uint8:
		return DTypeUint8
	case int64:
		return DTypeInt64
	case uint32:
		return DTypeUint32
	case uint64:
		return DTypeUint64
	case int8:
		return DTypeInt8
	case Float16:
		return DTypeFloat16
	case BFloat16:
		return DTypeBFloat16
	}
	return DType(reduce.OfKind(reflect.TypeFor[T]().Kind()))
}
