//go:build !amd64 || purego

package reduce

// detectISA reports no vector instruction sets: this build has only the
// scalar kernels.
func detectISA() vectorISA { return vectorISA{} }

// applyVector reports false: this build has no vector kernels.
func applyVector(dt DType, op Op, dst, a, b []byte) bool { return false }

// applyVectorNT reports false: this build has no vector kernels.
func applyVectorNT(dt DType, op Op, dst, a, b []byte, nt bool) bool { return false }

// copyVectorNT reports false: this build has no vector kernels.
func copyVectorNT(dst, src []byte) bool { return false }
