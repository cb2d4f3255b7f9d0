package shm

import (
	"sync/atomic"

	"github.com/hcomm-go/hcomm/internal/topo"
)

// Ranks apart.
//
// A rank asleep on its futex is placed, when a peer wakes it, by the
// kernel's wake-up balancing, which on a busy machine (no idle CPU) puts
// it on the waker's CPU. Two ranks that wake each other then end up
// sharing one CPU, and each call costs the waiter's whole polling time
// plus a sleep and a wake-up (20–40 µs for an 8-byte AllReduce instead of
// under 1 µs) until the load balancer moves one of them, which can take
// seconds. A fresh job starts that way: the ranks wake each other through
// the rendezvous before their first call. So a rank that wakes in a group
// call on the CPU its waker noted, on a host with a CPU per local rank,
// moves its thread off that CPU (its affinity narrowed to the other
// allowed CPUs, then put back at once): nothing stays bound, the kernel
// just starts from ranks apart. Ring waits (large messages, Send/Recv) do not move: there a rank
// runs a sender and a receiver thread, and moving one measured slower
// (2-rank AllReduce 32–128 MiB, under load).

// noteCPU records in word (plus one) the CPU the calling thread runs on;
// a rank that spreads (Transport.spread) calls it before it wakes a
// sleeping peer.
func noteCPU(word *uint32) {
	if c := topo.CurrentCPU(); c >= 0 {
		atomic.StoreUint32(word, uint32(c)+1)
	}
}

// moveApart moves the calling thread off the CPU a waker noted in word
// (see noteCPU) if it runs there, when this host has a CPU for every
// local rank. It reports whether it moved the thread.
func (t *Transport) moveApart(word *uint32) bool {
	if !t.spread {
		return false
	}
	w := atomic.LoadUint32(word)
	c := topo.CurrentCPU()
	if w == 0 || c < 0 || uint32(c)+1 != w {
		return false
	}
	return topo.MoveOff(c, len(t.local))
}
