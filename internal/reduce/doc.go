// Package reduce holds the reduction kernels: dst = a ⊕ b element-wise for
// every data type and reduction operator, over raw little-endian byte
// slices, plus the IEEE half and bfloat16 conversions.
//
// The numbering of DType and Op is the public API's (package hcomm converts
// by value), so constants here must not be renumbered.
//
// # Semantics
//
// Every type supports every operator. Avg reduces as Sum; the caller ends
// an Avg reduction with DivN.
//
// Integers: Sum and Prod wrap around in two's complement, as Go's
// arithmetic does; Min and Max are the ordinary ones.
//
// Float32 and Float64: Sum and Prod are IEEE 754 addition and
// multiplication, rounding to nearest even. Float16 and BFloat16 are
// widened to float32, combined there, and rounded back once per element
// per call; float32 is wide enough that this is the correctly rounded
// result of the 16-bit operation.
//
// Min and Max on floats propagate NaN: if either operand is a NaN the
// result is the type's canonical quiet NaN (float32 0x7fc00000, float64
// 0x7ff8000000000000, binary16 0x7e00, bfloat16 0x7fc0), whatever the
// NaNs' payloads. Min(−0, +0) is −0 and Max(−0, +0) is +0. Min and Max are
// therefore commutative and associative bit for bit: a reduction gives the
// same bits whatever order the ranks' contributions are combined in.
//
// Sum and Prod are commutative except for NaN payloads: which payload a
// NaN result carries is up to the hardware (x86 keeps the first NaN
// operand's, other machines may return a default NaN), so it may depend on
// the operand order and the machine. The result is a NaN either way, and
// DivN treats NaNs the same way.
//
// # Memory
//
// The kernels reinterpret the byte slices as typed slices in place.
// amd64 and arm64 (and 386 and ppc64le) accept unaligned loads and stores,
// so a slice may start at any byte offset there and still runs at full
// speed. On big-endian machines, and on machines that would fault on the
// unaligned slices given, the same kernels run on copies bounced through
// aligned scratch buffers in native byte order, so the results are the
// same everywhere. No call allocates.
package reduce
