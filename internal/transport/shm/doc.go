// Package shm is the transport between ranks that run as processes of one
// host. All local ranks of a communicator share one memory segment, and
// every message crosses it through a lock-free ring or, when it is large,
// through a single-copy read of the sender's memory.
//
// # Setup
//
// The lowest local rank creates a file with a random name in /dev/shm,
// sizes it (and reserves its pages, so that running out of shared memory is
// an error from [New] rather than a SIGBUS later), maps it and publishes its
// name through the communicator's key-value store. The other local ranks
// read the name, map the file and record their process id in the segment;
// each then increments an attachment counter. Once the counter shows every
// local rank, the file is unlinked: the mapping lives on in the attached
// processes and disappears with the last of them, so nothing is left behind
// in /dev/shm even when a process is later killed. Error paths unlink too,
// and the creator removes stale segments whose creating process is gone.
//
// # Segment layout
//
// The segment starts with a header page (magic, version, geometry, creator
// pid, attachment counter), followed by one page per local rank (pid, state
// flags, abort reason), the group area (ten pages per local rank: slots
// for small collectives run without messages, see [Transport.GroupRun])
// and one ring per ordered pair of local ranks. A ring
// is a control page, Slots entries of 128 bytes and Slots slots of
// SlotBytes bytes; ring position i uses entry and slot i mod Slots. The
// control page keeps the producer's counter (head) and the consumer's
// counter (tail) on separate cache lines, each next to the flag the other
// side sets before it sleeps on that counter; a third line holds the state
// word of the single-copy handshake and a fourth the "broken" flag. Both
// counters are free-running 32-bit values: head-tail positions are full.
// Each entry starts with a stamp, the position + 1, which the producer
// writes after the position's bytes and before head: the consumer polls
// the stamp of the position it reads next, in the cache lines it is about
// to read anyway, and looks at head only before it sleeps. Each end caches
// the other's counter and reads it again only when the ring looks full
// (producer); so in steady state a small message moves one pair of cache
// lines from one core to the other.
//
// Nothing in the segment is a Go pointer; the memory is not Go's, and the
// only addresses stored in it are the integers of single-copy descriptors.
//
// # Messages
//
// A message starts with a header in the entry of its first position:
// kind, payload length, the sender's fingerprint in a fixed little-endian
// layout, and for single-copy messages the address of the sender's buffer.
// An inline message of up to 64 bytes travels in the entry's second cache
// line; a longer one fills the position's slot and whole following
// positions' slots; the receiver copies (or reduces) every slot straight
// into the caller's buffer and releases it, so sender and receiver overlap.
//
// Messages of at least Config.CMAThreshold bytes (and above 128 KiB, so the
// buffer cannot live on a goroutine stack that may move) are posted as a
// descriptor instead. The receiver reads the payload directly from the
// sender's address space with process_vm_readv and then releases the
// descriptor slot, which is the sender's signal that its buffer may be
// reused. A small state word (posted, reading, done, skipped, fallback,
// revoked) makes the hand-over safe: a sender that gives up (cancelled
// context, abort) revokes the descriptor with a compare-and-swap, and a
// receiver whose read was revoked discards what it read. When the read is
// not permitted (EPERM, ENOSYS, ...) the receiver answers "fallback", the
// sender streams the payload through the ring after the descriptor, and
// that sender uses the ring for later large messages to that peer.
//
// # Process isolation
//
// Single-copy reads are ptrace-level access: where Yama restricts ptrace
// (ptrace_scope 1), a process may read another's memory only if it is an
// ancestor of it or was named by it with prctl(PR_SET_PTRACER). A rank
// whose single-copy sends are off (Config.CMAThreshold < 0; hcomm's
// default) changes nothing. A rank that posts single-copy descriptors
// names, once every local rank has attached, the peer that will read its
// memory: with one local peer that peer's pid. Yama keeps a single ptracer
// per process, but admits the named process's descendants too, so with
// several local peers the rank names their nearest common ancestor other
// than init, as a rule the launcher (hcomm run, torchrun, mpirun), which
// admits the job's local ranks and the launcher's other descendants but
// not the user's other processes. Where the peers share no such ancestor
// nobody is named, and under Yama their reads are refused and fall back to
// the ring. PR_SET_PTRACER_ANY is never used. Without Yama (or with
// ptrace_scope 0) every process of the same user may read a rank's memory
// anyway: ranks are isolated from other users, not from the same user.
//
// # Waiting
//
// A side that must wait first polls (the stamp, or the tail) for 2 µs
// without yielding, then until about 10 µs letting the process's other
// goroutines run between polls; with Config.Yield (more local ranks than
// CPUs) it yields the CPU with sched_yield between polls from the start,
// for up to 50 µs. Then it sets its waiter flag, re-checks the counter and
// sleeps on it with FUTEX_WAIT for at most a few tens of milliseconds. The other
// side issues FUTEX_WAKE only when it sees the flag, so the fast path makes
// no system call. Each wake-up or timeout re-checks the context, a local
// Abort or Close, the ring's broken flag and the peer's state flags; after
// 100 ms of waiting it also checks that the peer process still exists
// (through a pidfd, which also sees processes that exited but were not yet
// reaped, or kill(pid, 0) where pidfds are unavailable). A missing peer
// fails the call with an *errs.PeerError of kind errs.ErrPeerLost.
//
// # Errors and stream consistency
//
// When a received message does not match (fingerprint or length), Recv
// still consumes the whole message without writing to the caller's buffer
// (a single-copy message is answered "skipped") and returns an
// *errs.MismatchError, so the stream stays consistent and the sender's Send
// completes normally.
//
// A transfer abandoned half way (a cancelled context, an abort or a
// protocol violation while part of a message has crossed) leaves the ring
// unusable: it is marked broken, and every later call on it, on both sides,
// fails with an *errs.PeerError of kind errs.ErrPeerLost. Waits that end
// before any part of a message moved leave the ring intact.
//
// Abort stores this rank's reason in the segment, raises its aborted flag
// and wakes every futex of its rings; peers waiting on this rank then fail
// with an *errs.PeerError of kind errs.ErrAborted carrying the reason.
// Close raises a "departed" flag that peers waiting on this rank report as
// errs.ErrPeerLost, waits for this process's own calls to return (they are
// woken) and unmaps the segment.
//
// Headers and counters written by a peer are validated before use; a
// malformed one breaks the ring and is logged, never trusted for an
// allocation or an index.
//
// The package needs Linux; elsewhere [New] returns an error.
package shm
