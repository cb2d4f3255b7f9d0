package reduce

// vectorISA records which vector instruction sets the kernels may use. It
// is filled in from the CPU's features when the package initializes.
type vectorISA struct {
	avx2 bool // AVX2: every vector kernel but the binary16 arithmetic
	f16c bool // F16C, with AVX2: binary16 Sum and Prod
}

// isa is the instruction sets in use. Tests clear it to run the scalar
// kernels through Apply; nothing else writes it after initialization.
var isa = detectISA()

// vecBytes is the width of one vector: the vector kernels work on whole
// multiples of it and leave the rest of a slice to the scalar kernels.
const vecBytes = 32
