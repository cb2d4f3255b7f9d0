package shm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/shmdir"
	"github.com/hcomm-go/hcomm/internal/topo"
)

// Segment geometry. Offsets are in bytes from the start of the segment or
// of the named block.
const (
	segMagic   = 0x4d48_535f_4d4d_4f43 // "COMM_SHM" read as little endian
	segVersion = 4

	pageSize = 4096
	lineSize = 128 // two cache lines, so adjacent-line prefetch shares nothing

	// Header page.
	offMagic      = 0
	offVersion    = 8
	offNLocal     = 12
	offSlotBytes  = 16
	offSlots      = 20
	offTotal      = 24
	offCreatorPid = 32
	offAttached   = lineSize

	// Per-rank page.
	rbPid       = 0
	rbCPU       = 64 // uint32: the CPU (plus one) the rank ran on when it last woke a peer
	rbState     = lineSize
	rbReasonLen = lineSize + 4
	rbReason    = 2 * lineSize
	reasonMax   = pageSize - rbReason

	// Ring control page.
	rcHead     = 0
	rcConsWait = 4
	rcTail     = lineSize
	rcProdWait = lineSize + 4
	rcCMA      = 2 * lineSize
	rcBroken   = 3 * lineSize

	// Group area: one block per local rank (see group_linux.go).
	grDone         = 0             // uint32: the last group call this rank finished
	grSleepers     = lineSize      // uint32: processes asleep on this rank's words
	grSlots        = 2 * lineSize  // groupSlots slots of groupSlotBytes
	groupSlots     = 32            // slots per rank, used round robin by sequence
	groupHdr       = 32            // slot header: sequence, length, fingerprint
	groupMax       = 1024          // largest contribution
	groupSlotBytes = 1152          // header and payload, whole 128-byte lines
	groupBlock     = 10 * pageSize // grSlots + groupSlots*groupSlotBytes, in whole pages

	maxLocal     = 4096
	maxSlotBytes = 1 << 30
	maxSlots     = 1 << 16
	maxSegment   = 1 << 44

	namePrefix = "hcomm-shm-"
	segmentKey = "shm/segment"
	// creatorKey holds the creator's pid from the start of its setup, so
	// that the others can tell a creator still working from a dead one.
	creatorKey = "shm/creator"
)

// Rank state flags (rbState).
const (
	stateAborted  uint32 = 1 << 0
	stateDeparted uint32 = 1 << 1
)

// shmDir is where segments are created.
var shmDir = "/dev/shm"

// segment is one mapping of a communicator's shared memory.
type segment struct {
	mem       []byte
	path      string
	n         int // local ranks
	slotBytes int
	slots     int
}

// geometry returns the byte size of one ring and of the whole segment, or
// an error when the numbers are out of range.
func geometry(n, slotBytes, slots int) (ringStride, total int, err error) {
	switch {
	case n < 2 || n > maxLocal:
		return 0, 0, fmt.Errorf("%d local ranks out of range [2, %d]", n, maxLocal)
	case slotBytes < pageSize || slotBytes > maxSlotBytes || slotBytes%64 != 0:
		return 0, 0, fmt.Errorf("slot size %d out of range", slotBytes)
	case slots < 2 || slots > maxSlots:
		return 0, 0, fmt.Errorf("%d slots per ring out of range [2, %d]", slots, maxSlots)
	}
	// A ring: its control page, the position entries, the slots.
	entries := roundUp(int64(entrySize)*int64(slots), pageSize)
	data := roundUp(int64(slotBytes)*int64(slots), pageSize)
	stride := pageSize + entries + data
	size := int64(pageSize) + int64(n)*(pageSize+groupBlock) + int64(n)*int64(n-1)*stride
	if size > maxSegment {
		return 0, 0, fmt.Errorf("segment of %d bytes too large", size)
	}
	return int(stride), int(size), nil
}

func roundUp(x, m int64) int64 { return (x + m - 1) / m * m }

func (s *segment) u32(off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.mem[off]))
}

func (s *segment) rankBlock(i int) int { return pageSize + i*pageSize }

// cpu is local rank i's noted CPU word (rbCPU).
func (s *segment) cpu(i int) *uint32 { return s.u32(s.rankBlock(i) + rbCPU) }

// ringOffset returns the offset of the ring carrying messages from local
// rank i to local rank j.
func (s *segment) ringOffset(i, j int) int {
	stride, _, _ := geometry(s.n, s.slotBytes, s.slots)
	k := i*(s.n-1) + j
	if j > i {
		k--
	}
	return pageSize + s.n*(pageSize+groupBlock) + k*stride
}

// homeNode returns the NUMA node of this process's CPUs, or -1 on a
// machine of one node or when they span nodes (topo.LocalHomeNode). Tests
// replace it.
var homeNode = topo.LocalHomeNode

// placeIncoming places the rings local rank me reads on NUMA node node:
// the creator reserved every page of the segment on its own node, so me
// faults its rings in and moves them (topo.Place) right after mapping the
// segment. A page a peer has mapped already is not moved (a fast peer may
// have started writing): placement is best effort. The policy stays with
// the segment's pages, so it places any page reserved later too.
func (s *segment) placeIncoming(me, node int) error {
	stride, _, _ := geometry(s.n, s.slotBytes, s.slots)
	for j := 0; j < s.n; j++ {
		if j == me {
			continue
		}
		off := s.ringOffset(j, me)
		for p := off; p < off+stride; p += pageSize {
			atomic.LoadUint32(s.u32(p))
		}
		if err := topo.Place(s.mem[off:off+stride], node); err != nil {
			return err
		}
	}
	return nil
}

// populateRingsMax bounds the bytes of rings populate maps in ahead.
const populateRingsMax = 64 << 20

// populate maps into this process's page tables, ahead of the first
// collective, the pages local rank me touches first: the header, the
// rank pages and the group area (group is true when small collectives run
// there), and, when rings is true and they total at most
// populateRingsMax, the rings me writes and reads. The pages exist
// already (the creator reserved them); what a first touch would still
// cost is a minor fault per page, in the call that touches it, while a
// peer polls for it: 20 of them in the first 32 small collectives of a
// 2-rank job, and as many as the rings have pages in the first large
// ones. MADV_POPULATE_WRITE changes no byte, so the peers may already be
// using the pages; a kernel without it (before Linux 5.14) leaves the
// faults where they were.
func (s *segment) populate(me int, group, rings bool) {
	end := pageSize + s.n*pageSize
	if group {
		end += s.n * groupBlock
	}
	_ = unix.Madvise(s.mem[:end], unix.MADV_POPULATE_WRITE)
	stride, _, _ := geometry(s.n, s.slotBytes, s.slots)
	if !rings || 2*(s.n-1)*stride > populateRingsMax {
		return
	}
	for j := 0; j < s.n; j++ {
		if j == me {
			continue
		}
		for _, off := range [2]int{s.ringOffset(me, j), s.ringOffset(j, me)} {
			_ = unix.Madvise(s.mem[off:off+stride], unix.MADV_POPULATE_WRITE)
		}
	}
}

// groupOffset returns the offset of local rank i's block of the group
// area.
func (s *segment) groupOffset(i int) int {
	return pageSize + s.n*pageSize + i*groupBlock
}

// attached returns the attachment counter.
func (s *segment) attached() *uint32 { return s.u32(offAttached) }

func (s *segment) pid(i int) int {
	return int(int32(atomic.LoadUint32(s.u32(s.rankBlock(i) + rbPid))))
}

func (s *segment) state(i int) *uint32 { return s.u32(s.rankBlock(i) + rbState) }

// setReason records why local rank i aborted or failed; it must precede
// raising the state flag.
func (s *segment) setReason(i int, reason string) {
	b := s.rankBlock(i)
	n := copy(s.mem[b+rbReason:b+rbReason+reasonMax], reason)
	atomic.StoreUint32(s.u32(b+rbReasonLen), uint32(n))
}

// reason returns the text local rank i left when it aborted.
func (s *segment) reason(i int) string {
	b := s.rankBlock(i)
	n := min(int(atomic.LoadUint32(s.u32(b+rbReasonLen))), reasonMax)
	return string(s.mem[b+rbReason : b+rbReason+n])
}

func (s *segment) unmap() {
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
}

// unlink removes the segment's file; a missing file is fine.
func (s *segment) unlink() error {
	if err := unix.Unlink(s.path); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// createSegment makes, maps and publishes a new segment for n local ranks.
// A failure (/dev/shm full, say) is published in the segment's place, so
// that the other local ranks fail at once instead of waiting for a name.
func createSegment(ctx context.Context, cfg *Config, n int) (*segment, error) {
	if err := cfg.KV.Set(ctx, creatorKey, []byte(strconv.Itoa(os.Getpid()))); err != nil {
		return nil, fmt.Errorf("publish the creator's pid: %w", err)
	}
	s, err := createSegment1(ctx, cfg, n)
	if err != nil {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = cfg.KV.Set(pctx, segmentKey, []byte(failedPrefix+err.Error()))
		cancel()
	}
	return s, err
}

// setupHook, set by tests, runs in the creator once the segment's file
// exists and before it is published.
var setupHook func()

// failedPrefix marks a creator's failure published under segmentKey.
const failedPrefix = "!"

func createSegment1(ctx context.Context, cfg *Config, n int) (*segment, error) {
	_, size, err := geometry(n, cfg.SlotBytes, cfg.Slots)
	if err != nil {
		return nil, err
	}
	sweepStale(cfg)
	name := fmt.Sprintf("%s%d-%016x", namePrefix, os.Getpid(), rand.Uint64())
	s := &segment{path: filepath.Join(shmDir, name), n: n, slotBytes: cfg.SlotBytes, slots: cfg.Slots}
	fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", s.path, err)
	}
	defer unix.Close(fd)
	if setupHook != nil {
		setupHook()
	}
	fail := func(err error) (*segment, error) {
		s.unmap()
		_ = s.unlink()
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(fmt.Errorf("size %s to %d bytes: %w", s.path, size, err))
	}
	// Reserve the pages now: touching a page tmpfs cannot supply later
	// would kill the process with SIGBUS.
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil && err != unix.EOPNOTSUPP {
		return fail(fmt.Errorf("reserve %d bytes in %s: %w", size, shmDir, err))
	}
	if s.mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail(fmt.Errorf("map %s: %w", s.path, err))
	}
	atomic.StoreUint32(s.u32(offVersion), segVersion)
	atomic.StoreUint32(s.u32(offNLocal), uint32(n))
	atomic.StoreUint32(s.u32(offSlotBytes), uint32(cfg.SlotBytes))
	atomic.StoreUint32(s.u32(offSlots), uint32(cfg.Slots))
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.mem[offTotal])), uint64(size))
	atomic.StoreUint32(s.u32(offCreatorPid), uint32(os.Getpid()))
	atomic.StoreUint32(s.u32(s.rankBlock(0)+rbPid), uint32(os.Getpid()))
	atomic.StoreUint32(s.attached(), 1)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.mem[offMagic])), segMagic)
	if err := cfg.KV.Set(ctx, segmentKey, []byte(name)); err != nil {
		return fail(fmt.Errorf("publish segment name: %w", err))
	}
	return s, nil
}

// validName reports whether a name read from the store is one this
// package creates, so a bad store value cannot point outside shmDir.
func validName(name string) bool {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok || len(name) > 64 || rest == "" {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && c != '-' {
			return false
		}
	}
	return true
}

// attachSegment maps the segment published by the creator and registers
// local rank me in it.
func attachSegment(ctx context.Context, cfg *Config, n, me int) (*segment, error) {
	name, err := segmentName(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if !validName(name) {
		return nil, fmt.Errorf("store holds an invalid segment name %q", name)
	}
	s := &segment{path: filepath.Join(shmDir, name), n: n}
	fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", s.path, err)
	}
	if st.Size < pageSize || st.Size > maxSegment {
		return nil, fmt.Errorf("segment %s has a bad size (%d bytes)", s.path, st.Size)
	}
	if s.mem, err = unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, fmt.Errorf("map %s: %w", s.path, err)
	}
	magic := atomic.LoadUint64((*uint64)(unsafe.Pointer(&s.mem[offMagic])))
	version := atomic.LoadUint32(s.u32(offVersion))
	gotN := int(atomic.LoadUint32(s.u32(offNLocal)))
	s.slotBytes = int(atomic.LoadUint32(s.u32(offSlotBytes)))
	s.slots = int(atomic.LoadUint32(s.u32(offSlots)))
	total := atomic.LoadUint64((*uint64)(unsafe.Pointer(&s.mem[offTotal])))
	_, size, gerr := geometry(n, s.slotBytes, s.slots)
	switch {
	case magic != segMagic || version != segVersion:
		err = fmt.Errorf("segment %s is not an hcomm segment of version %d", s.path, segVersion)
	case gotN != n:
		err = fmt.Errorf("segment %s was made for %d local ranks, this rank counts %d", s.path, gotN, n)
	case gerr != nil:
		err = fmt.Errorf("segment %s: %w", s.path, gerr)
	case uint64(size) != total || int64(size) != st.Size:
		err = fmt.Errorf("segment %s has %d bytes, its geometry needs %d", s.path, st.Size, size)
	}
	if err != nil {
		s.unmap()
		return nil, err
	}
	if s.slotBytes != cfg.SlotBytes || s.slots != cfg.Slots {
		cfg.Logger.Debug("shm: using the creator's ring geometry",
			"slot_bytes", s.slotBytes, "slots", s.slots)
	}
	atomic.StoreUint32(s.u32(s.rankBlock(me)+rbPid), uint32(os.Getpid()))
	atomic.AddUint32(s.attached(), 1)
	futexWakeAll(s.attached())
	return s, nil
}

// awaitAttached waits until all n local ranks have attached. It fails
// when ctx ends, when a rank reports a failed setup, or when the creator
// process is gone.
func (s *segment) awaitAttached(ctx context.Context) error {
	var ts unix.Timespec
	creator := int(int32(atomic.LoadUint32(s.u32(offCreatorPid))))
	for {
		got := atomic.LoadUint32(s.attached())
		if int(got) >= s.n {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for %d of %d local ranks to attach: %w", s.n-int(got), s.n, err)
		}
		for i := range s.n {
			if atomic.LoadUint32(s.state(i))&stateAborted != 0 {
				return fmt.Errorf("local rank %d failed during setup: %s", i, s.reason(i))
			}
		}
		if creator > 0 && !shmdir.Alive(creator) {
			return errors.New("the process that created the segment is gone")
		}
		d := 20 * time.Millisecond
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, max(time.Until(dl), time.Millisecond))
		}
		futexSleep(s.attached(), got, d, &ts)
	}
}

// creatorPoll is how often a rank waiting for the segment's name checks
// that its creator is still alive.
const creatorPoll = 100 * time.Millisecond

// segmentName waits for the creator to publish the segment's name. It
// fails at once with the creator's own error when the creator published
// one, and within creatorPoll when the creator's process has exited
// (killed during setup), removing the segment it may have left.
func segmentName(ctx context.Context, cfg *Config) (string, error) {
	pid := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, creatorPoll)
		v, err := cfg.KV.Get(wctx, segmentKey)
		cancel()
		if err == nil {
			name := string(v)
			if reason, failed := strings.CutPrefix(name, failedPrefix); failed {
				return "", fmt.Errorf("the local rank creating the shared-memory segment failed: %.400s", reason)
			}
			return name, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("read segment name: %w", err)
		}
		if pid == 0 {
			pctx, cancel := context.WithTimeout(ctx, creatorPoll)
			if v, err := cfg.KV.Get(pctx, creatorKey); err == nil {
				pid, _ = strconv.Atoi(string(v))
			}
			cancel()
		}
		if pid > 0 && !shmdir.Alive(pid) {
			removeSegmentsOf(cfg, pid)
			return "", fmt.Errorf("the local rank creating the shared-memory segment (pid %d) exited during setup", pid)
		}
	}
}

// removeSegmentsOf removes the segments made by process pid, which has
// exited.
func removeSegmentsOf(cfg *Config, pid int) {
	ents, err := os.ReadDir(shmDir)
	if err != nil {
		return
	}
	prefix := namePrefix + strconv.Itoa(pid) + "-"
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) && os.Remove(filepath.Join(shmDir, e.Name())) == nil {
			cfg.Logger.Info("shm: removed the segment of a creator that exited during setup", "name", e.Name(), "creator_pid", pid)
		}
	}
}

// sweepStale removes segments left by creators that died before every
// rank attached. Segments are unlinked as soon as everyone attached, so a
// file whose creator is gone can only be such a leftover.
func sweepStale(cfg *Config) {
	shmdir.SweepStale(shmDir, namePrefix, 10*time.Second, func(name string, pid int) {
		cfg.Logger.Info("shm: removed a stale segment", "name", name, "creator_pid", pid)
	})
}
