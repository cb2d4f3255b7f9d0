//go:build linux && !amd64

package shm

import "sync/atomic"

// publishSeq stores a slot's sequence word after the slot's other bytes,
// with release order; see the amd64 version.
func publishSeq(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// prefetch is a hint that does nothing here; see the amd64 version.
func prefetch(*byte) {}

func prefetchW(*byte) {}

const hasPrefetchW = false
