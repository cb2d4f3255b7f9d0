//go:build linux

package shm

// publishSeq stores a slot's sequence word after the slot's other bytes.
// On amd64 a plain store is a release store (stores are not reordered with
// stores), so it spares the full fence of an atomic store (XCHG), which
// waits for the store buffer to drain and for the line to arrive from the
// core polling it. The sleeper check it would order is done later, after
// the fence of the call's done word or before this rank sleeps
// (grFlush). It is written in assembly so that the compiler, which Go's
// memory model does not forbid to move a plain store, keeps it after the
// slot's other stores: a call it cannot see into is a barrier to it.
//
//go:noescape
func publishSeq(p *uint32, v uint32)

// prefetch asks the CPU to bring the cache line at p into its caches,
// without waiting for it and without any effect on memory: a hint. A
// Broadcast reader uses it on the root's next slot (grPrefetchNext).
//
//go:noescape
func prefetch(p *byte)

// prefetchW asks the CPU to bring the cache line at p into its caches in
// exclusive state, ready to be written (PREFETCHW): other CPUs' copies are
// invalidated now rather than when this CPU writes the line. A hint, like
// prefetch; only where hasPrefetchW.
//
//go:noescape
func prefetchW(p *byte)

// cpuid returns EAX and ECX of CPUID leaf (subleaf 0).
func cpuid(leaf uint32) (eax, ecx uint32)

// hasPrefetchW reports whether the CPU has PREFETCHW (CPUID
// 0x80000001:ECX bit 8, "3DNowPrefetch"/PRFCHW). On CPUs without it the
// instruction may fault, so it is never issued there.
var hasPrefetchW = func() bool {
	if top, _ := cpuid(0x80000000); top < 0x80000001 {
		return false
	}
	_, ecx := cpuid(0x80000001)
	return ecx&(1<<8) != 0
}()
