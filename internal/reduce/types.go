package reduce

import "fmt"

// DType is an element type.
type DType uint8

const (
	Int8 DType = iota + 1
	Uint8
	Int32
	Uint32
	Int64
	Uint64
	Float16
	BFloat16
	Float32
	Float64
	numDTypes
)

var dtypeNames = [...]string{Int8: "int8", Uint8: "uint8", Int32: "int32", Uint32: "uint32",
	Int64: "int64", Uint64: "uint64", Float16: "float16", BFloat16: "bfloat16",
	Float32: "float32", Float64: "float64"}

var dtypeSizes = [...]int{Int8: 1, Uint8: 1, Int32: 4, Uint32: 4, Int64: 8, Uint64: 8,
	Float16: 2, BFloat16: 2, Float32: 4, Float64: 8}

// Valid reports whether d is a known type.
func (d DType) Valid() bool { return d >= Int8 && d < numDTypes }

// Size returns the size of one element in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeSizes[d]
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == Float16 || d == BFloat16 || d == Float32 || d == Float64 }

func (d DType) String() string {
	if d.Valid() {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Op is a reduction operator.
type Op uint8

const (
	Sum Op = iota + 1
	Prod
	Min
	Max
	Avg // reduced as Sum; the caller divides by the number of ranks at the end
	numOps
)

var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max", Avg: "avg"}

// Valid reports whether o is a known operator.
func (o Op) Valid() bool { return o >= Sum && o < numOps }

func (o Op) String() string {
	if o.Valid() {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}
