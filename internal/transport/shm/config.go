package shm

import (
	"context"
	"log/slog"
)

// KV is the part of the rendezvous store the transport needs to exchange
// segment names.
type KV interface {
	// Set stores value under key.
	Set(ctx context.Context, key string, value []byte) error
	// Get returns the value of key, waiting until the key exists.
	Get(ctx context.Context, key string) ([]byte, error)
}

// Defaults for the zero values of Config fields.
const (
	DefaultSlotBytes    = 256 << 10
	DefaultSlots        = 4
	DefaultCMAThreshold = 256 << 10
)

// Config describes this rank's place in the communicator.
type Config struct {
	Rank, Size int // global rank and communicator size

	// Local lists the global ranks on this host, sorted, including Rank.
	// Only these ranks are peers of the transport.
	Local []int

	// KV is the rendezvous store, already namespaced for this
	// communicator. It may be nil when Local holds only Rank.
	KV KV

	// SlotBytes is the size of one ring slot (default 256 KiB; at least
	// 4 KiB, rounded up to a multiple of 64). Slots is the number of slots
	// per ring (default 4, at least 2). The creating rank's values apply
	// to everyone.
	SlotBytes int
	Slots     int

	// CMAThreshold is the message size from which payloads are read
	// directly from the sender's memory with process_vm_readv instead of
	// being copied through the ring (default 256 KiB). Messages of 128 KiB
	// or less always use the ring. A negative value disables single-copy
	// reads.
	CMAThreshold int

	// Yield makes waits give the CPU away with sched_yield while polling,
	// and poll for longer before sleeping, as when the local ranks
	// outnumber the CPUs: 0 decides by that count, a positive value always
	// yields, a negative value never does.
	Yield int

	// Logger receives setup events and peer protocol violations; nil
	// discards them.
	Logger *slog.Logger

	// forceCMAFallback makes this rank answer every single-copy
	// descriptor with "fallback", as if process_vm_readv were refused.
	forceCMAFallback bool

	// noPopulate leaves the segment's pages to be mapped by their first
	// touch (segment.populate not called).
	noPopulate bool
}
