// Package sim predicts the time of a collective on a modelled cluster by
// running the programs internal/algo builds — the ones the executor runs —
// through a discrete-event model of a topology.
//
// # Model
//
// Every rank executes its program as internal/exec does: steps in order,
// the ops of a step concurrently, local ops (copies, reductions) first, or
// beside the messages when they are large and a rank has cores enough
// (exec.OverlapMin, exec.OverlapProcs);
// every message cut into chunks of ChunkBytes, a forwarding op passing
// chunk i on before receiving chunk i+1. A chunk of b bytes between two
// ranks takes α + b·β of its link class (shared memory in a host, network
// in a rack, network across racks) once it holds the resources it crosses,
// each a FIFO server: a core of the host (shared-memory copies, b·β) and
// the host's memory bandwidth for intra-host chunks; the sending host's
// NIC, the receiving host's NIC and, between racks, both racks' uplinks
// for the others, after NetCPU on a core of the sender's host (hosts
// of one machine sharing its cores: HostsPerMachine). Flows crossing one
// resource therefore share its bandwidth, chunk by chunk. A receive-reduce
// occupies a core of the receiving host for b·γ after the chunk arrived. A chunk leaves when
// the sender reaches it, and the sender moves on when it has arrived —
// or at once for a one-chunk send the transport buffers (SHMEager,
// NetEager: transport.Eager). Over shared memory the host's cache speeds
// copies up while what its ranks touch fits (CacheBytes), and ranks
// sharing a core see chunks a turn late (SHMWake).
//
// The executor's large-message fusions over shared memory are simulated
// where it makes them (peers on one host; Options.Unfused turns them off):
// two steps forming a sched.PairExchange whose larger message is at least
// exec.ExchangeMin run as one step — the first message sent, the peer's
// received and reduced piece by piece, each reduced piece sent back as it
// is made (a receive-reduce-send to the peer, copied from the cache: β
// times CacheFactor), the peer's reduced pieces received — in pieces of a
// ring slot (SHMEager) rather than chunks; and a step's copy of at least
// exec.CopySendMin bytes whose source the step also sends rides the send,
// each piece copied from the slot it was just written to (CopyBeta times
// CacheFactor on the sender's core) instead of from memory before the
// messages. (A step of a send and a receive with one peer that the
// executor moves on one goroutine from exec.PairMin costs the same here:
// the cores are a pool of the host's either way.)
//
// # Scale
//
// The simulator keeps compiled programs (24 bytes per op, no regions) of
// one period of ranks only: when rank r+P's program is rank r's with every
// peer moved by P (checked on sample ranks), P programs describe all n; so
// do they when, n a power of two, rank r⊕d's program is rank r's with every
// peer XORed with d for every multiple d of P (recursive doubling and
// halving: P = 1). When moreover the topology repeats every Q ranks (a
// host, or a rack when there are several; powers of two for XOR) and
// lcm(P, Q) divides n, only lcm(P, Q) ranks are simulated: the others do
// the same at the same times on resources of their own, so the result is
// the same. Ring AllReduce on 16,384 ranks (2,048 hosts × 8, racks of 32)
// thus simulates 256 ranks holding one program, and so do recursive
// doubling and halving. Long runs of identical steps are folded in time
// (fold.go): once the machine repeats itself every few steps, the rest of
// the run is jumped over. Events sit in one binary heap of 16-byte
// entries; flows are aggregated per resource (a busy-until time each),
// never per rank pair.
package sim

import (
	"fmt"
	"math"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/exec"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// Link classes.
const (
	ClassSHM = iota
	ClassNet
	ClassRack
	nClass
)

// ClassNames names the link classes.
var ClassNames = [nClass]string{"shm", "net", "rack"}

// Breakdown is what the time along a path was spent on; its parts add up
// to the path's length.
type Breakdown struct {
	Alpha    float64       // message latency (α per chunk)
	Transfer float64       // moving bytes (b·β, or b over the narrowest resource)
	Queue    float64       // waiting for a busy core, memory, NIC or uplink
	Reduce   float64       // reducing received chunks (b·γ)
	Local    float64       // local copies and reductions
	Msgs     [nClass]int64 // chunks on the path by link class
	Bytes    [nClass]int64 // their bytes
	Ranks    [2]int32      // the path's last rank and the rank its last chunk came from (-1: none)
	_        [0]func()     // not comparable
}

// Total returns the sum of the parts.
func (b *Breakdown) Total() float64 { return b.Alpha + b.Transfer + b.Queue + b.Reduce + b.Local }

// Result is the outcome of one simulated collective.
type Result struct {
	Algo     string
	Coll     sched.Coll
	N        int
	Bytes    int64   // the size reported, as hcomm perf reports it
	Time     float64 // seconds, the last rank's finish
	AlgBW    float64 // GB/s
	BusBW    float64 // GB/s, nccl-tests factors
	Critical Breakdown
	// Simulated is the number of ranks simulated (n, or one period of
	// ranks and topology), Period the program period: rank r's program
	// is rank r mod Period's with every peer moved by r − r mod Period
	// (XOR: XORed with it).
	Simulated, Period int
	XOR               bool
	// Folded is the number of steady-state periods jumped over (fold.go).
	Folded         int64
	Chunks, Events int64 // chunks sent and events processed (jumped ones counted)
	ModelBytes     int64 // memory of programs and simulation state, approximately
}

// Spec returns the spec hcomm perf measures for coll at size bytes on n
// ranks (float32 elements for the reducing collectives, bytes for the
// others; AllGather, ReduceScatter, Gather and Scatter sizes are totals,
// AllToAll a rank's row), and the size it reports.
func Spec(coll sched.Coll, n int, bytes int64) (sched.Spec, int, int64, error) {
	es := 1
	if coll.Reduces() {
		es = 4
	}
	count := func(unit int) int64 { return max(bytes/int64(es)/int64(unit), 1) }
	var s sched.Spec
	var reported int64
	switch coll {
	case sched.Barrier:
		return sched.Spec{Coll: sched.Barrier, N: n}, 1, 0, nil
	case sched.AllReduce, sched.Reduce, sched.Broadcast:
		c := count(1)
		if c > math.MaxInt32 {
			return s, 0, 0, fmt.Errorf("%w: %d elements", ErrTooLarge, c)
		}
		s = sched.Uniform(coll, n, int(c), 0, false)
		reported = c * int64(es)
	case sched.AllToAll:
		if n > 4096 {
			return s, 0, 0, fmt.Errorf("%w: AllToAll's count matrix on %d ranks", ErrTooLarge, n)
		}
		c := count(n)
		s = sched.Uniform(coll, n, int(c), 0, false)
		reported = c * int64(n) * int64(es)
	case sched.AllGather, sched.ReduceScatter, sched.Gather, sched.Scatter:
		c := count(n)
		if c*int64(n) > math.MaxInt32 {
			return s, 0, 0, fmt.Errorf("%w: %d elements", ErrTooLarge, c*int64(n))
		}
		s = sched.Uniform(coll, n, int(c), 0, false)
		reported = c * int64(n) * int64(es)
	default:
		return s, 0, 0, fmt.Errorf("sim: unknown collective %v", coll)
	}
	return s, es, reported, nil
}

// BusFactor is nccl-tests' bus bandwidth factor.
func BusFactor(coll sched.Coll, n int) float64 {
	switch coll {
	case sched.AllReduce:
		return 2 * float64(n-1) / float64(n)
	case sched.AllGather, sched.ReduceScatter, sched.AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// Options tune a run.
type Options struct {
	// NoQuotient simulates every rank even when one period would do
	// (for tests comparing the two).
	NoQuotient bool
	// Trace, if set, is called as each rank finishes a step; every rank
	// is then simulated (as with NoQuotient).
	Trace func(TraceStep)
	// MaxPieces bounds the pieces a message is simulated in (0: 64, or as
	// few as 8 when the simulated ranks have very many ops; see
	// pieceBudget): a message of more chunks is simulated as MaxPieces
	// pieces of several chunks each, with every chunk's α and bytes. Only
	// a pipeline's fill grows, by its depth times the difference between
	// a piece's time and a chunk's; -1 simulates every chunk.
	MaxPieces int
	// NoFold simulates every step even where the machine is in a steady
	// state (see fold.go; for tests comparing the two).
	NoFold bool
	// Repeat runs the collective this many times back to back on every
	// rank, without synchronising between them, as hcomm perf's timed
	// loop does (0 or 1: once). Time is then the end of the last.
	Repeat int
	// Unfused simulates the executor without its large-message fusions
	// over shared memory (a pair exchange fused into one transport call,
	// a copy riding its send; see the package comment): the executor as
	// it was before them, on which scripts/simval's kept runs were
	// measured.
	Unfused bool
}

// pieceBudget bounds the pieces of all the simulated ranks' messages when
// Options.MaxPieces is 0: 64 per message as long as they stay below it,
// then 32, 16 or 8 (dbtree's 16,384 ranks at 1 GiB: 16 pieces, 1.6
// million). At 256 ranks 16 pieces put dbtree within 1.4% of simulating
// every chunk, 64 within 2.1%.
const pieceBudget = 2 << 20

// Simulate runs algorithm a for coll on n ranks of topology t at size
// bytes (as hcomm perf counts sizes).
func Simulate(t Topology, a algo.Algorithm, coll sched.Coll, n int, bytes int64, opt Options) (Result, error) {
	if err := t.Check(); err != nil {
		return Result{}, err
	}
	if n < 1 || n > 1<<24 {
		return Result{}, fmt.Errorf("sim: %d ranks", n)
	}
	if a.Coll != coll {
		return Result{}, fmt.Errorf("sim: %s %s is not a %s algorithm", a.Coll, a.Name, coll)
	}
	s, es, reported, err := Spec(coll, n, bytes)
	if err != nil {
		return Result{}, err
	}
	if !a.Supports(s) {
		return Result{}, fmt.Errorf("sim: %s %s does not support %d ranks", coll, a.Name, n)
	}
	t.oversubscription(n)
	P, xor, err := period(a, s, es)
	if err != nil {
		return Result{}, err
	}
	ps := newPrograms()
	for r := range P {
		p, err := build(a, s, r)
		if err != nil {
			return Result{}, err
		}
		if err := ps.addRepeat(p, es, max(1, opt.Repeat)); err != nil {
			return Result{}, err
		}
	}
	warm := 1.0
	if t.CacheFactor > 0 {
		warm = t.CacheFactor
	}
	if t.CacheBytes > 0 && t.CacheFactor > 0 && t.workingSet(n, P, ps, bufBytes(coll, n, reported)) < t.CacheBytes {
		warm = 1 // already the cache's speed
		f := t.CacheFactor
		if t.oversubscribed(n) && t.SHMTurnCache > 0 {
			f = t.SHMTurnCache // turns evict the cores' own caches
		}
		t.SHM.Beta *= f
		t.Gamma *= f
		t.CopyBeta *= f
		t.MemBW /= f // the cache serves the copies, not memory
		if t.oversubscribed(n) && t.SHMMemShare > 0 {
			t.MemBW /= t.SHMMemShare // nothing is evicted between turns
		}
	}
	if t.hostOf != nil && len(t.hostOf) != n {
		return Result{}, fmt.Errorf("sim: the topology file places %d ranks, not %d", len(t.hostOf), n)
	}
	S, L := n, n
	Q := t.RanksPerHost
	hosts := (n + t.RanksPerHost - 1) / t.RanksPerHost
	if t.HostsPerRack > 0 && hosts > t.HostsPerRack {
		Q = t.RanksPerHost * t.HostsPerRack
	}
	if pm := t.perMachine(); pm > 1 {
		// Hosts share their machine's cores: the topology repeats every
		// machine at the least.
		Q = lcm(Q, min(t.RanksPerHost*pm, n))
	}
	// XOR by multiples of L maps hosts and racks onto hosts and racks only
	// when their sizes are powers of two.
	pow2 := func(x int) bool { return x&(x-1) == 0 }
	if l := lcm(P, Q); t.hostOf == nil && l < n && n%l == 0 && (!xor || pow2(Q) && pow2(t.RanksPerHost)) {
		L = l
		if !opt.NoQuotient && opt.Trace == nil {
			S = l
		}
	}
	// Pieces per message: 64, fewer (down to 8) when the simulated ranks'
	// ops would otherwise make more than pieceBudget pieces.
	piecesFor := func(S int) int {
		switch p := opt.MaxPieces; {
		case p > 0:
			return p
		case p < 0:
			return math.MaxInt32
		}
		p, ops := 64, int64(S/P)*int64(len(ps.ops))
		for p > 8 && ops*int64(p) > pieceBudget {
			p /= 2
		}
		return p
	}
	m := newMachine(t, n, S, P, L, ps, piecesFor(S))
	m.xor, m.trace, m.fuse, m.warm = xor, opt.Trace, !opt.Unfused, warm
	if !opt.NoFold && opt.Trace == nil && t.NICBurst == 0 {
		m.initFold()
	}
	if err := m.run(); err != nil {
		if S == n || int64(n)*int64(len(ps.ops))/int64(P) > maxOps {
			return Result{}, err
		}
		// A rank of the period talks to two ranks of one class in a
		// step: simulate every rank.
		m = newMachine(t, n, n, P, L, ps, piecesFor(n))
		m.xor, m.trace, m.fuse, m.warm = xor, opt.Trace, !opt.Unfused, warm
		if !opt.NoFold && opt.Trace == nil && t.NICBurst == 0 {
			m.initFold()
		}
		if err := m.run(); err != nil {
			return Result{}, err
		}
	}
	res := Result{Algo: a.Name, Coll: coll, N: n, Bytes: reported, Time: m.end, Critical: m.endBd,
		Simulated: m.S, Period: P, XOR: xor, Folded: m.fold.folded, Chunks: m.chunks, Events: m.events, ModelBytes: ps.bytes() + m.stateBytes()}
	if m.end > 0 {
		res.AlgBW = float64(reported) / m.end / 1e9
		res.BusBW = res.AlgBW * BusFactor(coll, n)
	}
	return res, nil
}

// ringSlots is the number of slots of a shared-memory ring, each of
// SHMEager bytes (internal/transport/shm's DefaultSlots).
const ringSlots = 4

// bufBytes returns a rank's input and output buffers' bytes for coll on n
// ranks at size reported (as hcomm perf reports it).
func bufBytes(coll sched.Coll, n int, reported int64) int64 {
	switch coll {
	case sched.AllGather, sched.Gather, sched.ReduceScatter, sched.Scatter:
		return reported + reported/int64(n)
	}
	return 2 * reported
}

// workingSet returns the bytes the most crowded host of n ranks touches
// running programs ps (those of ranks 0 to P−1, standing for all): every
// rank's buffers (bufs bytes) and the shared-memory rings it sends
// through, of which messages of m bytes use ringSlots positions of up to
// m bytes in turn.
func (t Topology) workingSet(n, P int, ps *programs, bufs int64) int64 {
	ring := ringSlots * max(t.SHMEager, 1)
	chunk := int64(t.ChunkBytes)
	if chunk <= 0 {
		chunk = exec.DefaultChunkBytes
	}
	host := func(r int32) int32 {
		if t.hostOf != nil {
			return t.hostOf[r]
		}
		return r / int32(t.RanksPerHost)
	}
	var rings int64
	most := map[int32]int64{}
	for r := range int32(P) {
		clear(most)
		lo, hi := ps.steps(int(r))
		for st := lo; st < hi; st++ {
			for _, o := range ps.step(st) {
				dst, ok := sendsTo(o.kind, o.peer, o.to)
				if ok && dst >= 0 && int(dst) < n && host(dst) == host(r) {
					most[dst] = max(most[dst], min(o.bytes, chunk))
				}
			}
		}
		for _, m := range most {
			rings += min(ringSlots*m, ring)
		}
	}
	return int64(t.most(n)) * (bufs + rings/int64(P))
}

// TraceStep is one step of one simulated rank, for Options.Trace.
type TraceStep struct {
	Rank, Step int
	Start, End float64 // seconds
	Ops        []TraceOp
}

// TraceOp is one op of a traced step; Peer and To are real ranks (-1 when
// the kind has none).
type TraceOp struct {
	Kind     sched.Kind
	Peer, To int
	Bytes    int64
}

// traceStep reports rank c's step that just ended.
func (m *machine) traceStep(c int32) {
	if m.trace == nil {
		return
	}
	rs := &m.ranks[c]
	ts := TraceStep{Rank: int(c), Step: int(rs.step - 1 - rs.first), Start: rs.stepStart, End: rs.stepEnd}
	ops := m.ps.step(rs.step - 1)
	if rs.fused {
		ts.Step--
		ops = m.fusedOps(m.ps.step(rs.step-2), ops)
	}
	for _, o := range ops {
		op := TraceOp{Kind: o.kind, Peer: -1, To: -1, Bytes: o.bytes}
		if !o.local() {
			op.Peer = int(m.mv(o.peer, rs.shift))
		}
		if o.kind == sched.RecvReduceSend || o.kind == sched.RecvCopySend {
			op.To = int(m.mv(o.to, rs.shift))
		}
		ts.Ops = append(ts.Ops, op)
	}
	m.trace(ts)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

// Op phases.
const (
	phStart   uint8 = iota // not started
	phWait                 // waiting for a chunk
	phArrived              // a chunk arrived (event at its arrival)
	phGot                  // a chunk was received (and reduced)
	phSent                 // a chunk was sent (event at its arrival)
)

type opState struct {
	bytes    int64
	nch, i   int32 // pieces, the piece in progress
	per      int32 // chunks per piece
	peer, to int32 // real ranks
	inCh     int32 // channel received from, -1
	outCh    int32 // channel sent to, -1
	kind     sched.Kind
	phase    uint8
	ev       bool // an event of this op is pending, at evT
	evT      float64
	bd       Breakdown // the path to this op's present
	lastMin  float64   // a forwarded piece ends no earlier than one chunk after this
	gap      float64   // a forwarded piece's chunks leave this far apart, besides their transfer
	chunk    int64     // the op's chunk: the machine's, or a ring slot in a fused exchange
	warm     bool      // its sends copy from a slot just written (a fused exchange's reduced pieces)
	carry    bool      // a copy of its bytes rides its send (exec.CopySendMin)
}

type rankState struct {
	step, last int32 // next step; end of the program's steps
	first      int32 // the program's first step
	stepStart  float64
	shift      int32 // peers of the program are moved by shift
	pending    int32 // ops of the step still running
	stepEnd    float64
	stepBd     Breakdown
	fused      bool // the step in progress is a fused exchange of two program steps
	ops        []opState
}

// item is a piece in flight: when its first and last chunks arrive, and
// the path to the first.
type item struct {
	first, last float64
	bd          Breakdown
}

type channel struct {
	q        []item
	head     int
	waitRank int32 // -1: nobody waits
	waitOp   int32
}

// event wakes op op of a rank at time t. Events at one time are taken in
// order of rank key: rank r's key sorts ranks by class (r mod L, L the
// period of ranks and topology) before copy (r div L), so that resources
// see equal-time requests in the same order whether one period of ranks
// or all of them are simulated.
type event struct {
	t    float64
	rank int32 // the key
	op   int32
}

func (a event) less(b event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.op < b.op
}

// machine is the state of one simulation.
type machine struct {
	t         Topology
	n, S, P   int
	ps        *programs
	chunk     int64
	eager     [nClass]int64 // largest send a transport buffers, per link class
	maxPieces int
	xor       bool    // programs repeat under XOR, not shifts (see period)
	wake      float64 // latency of a wait on shared memory (Topology.SHMWake)
	netWake   float64 // latency of a wait on the network (Topology.NetWake)
	fuse      bool    // the executor's fusions apply (not Options.Unfused)
	slot      int64   // a shared-memory ring slot: a fused exchange's piece
	warm      float64 // the factor of β for bytes copied from a slot just written (the cache's, if not already applied)
	fx        [3]cop  // the ops of a fused exchange in progress (see fusedOps)
	overlap   bool    // a step's large local ops run beside its messages (exec.OverlapMin)
	trace     func(TraceStep)
	L, copies int32 // the period of ranks and topology, S/L
	hostsSim  int   // hosts simulated
	racksSim  int

	ranks []rankState
	chans []channel
	chIdx map[uint64]int32
	heap  []event
	// markSend and markRecv hold, per simulated rank, the last step (stamp)
	// that sent to or received from its class (quotient check).
	markSend, markRecv []int32
	stamp              int32

	cores  []float64 // per simulated machine (host), t.cores() each: busy until
	mem    []float64 // per simulated host
	nicTx  []float64
	nicRx  []float64
	tokens []float64 // per simulated host, with NICBurst: tokens at tokT
	tokT   []float64
	up     []float64 // per simulated rack
	down   []float64
	end    float64
	endBd  Breakdown
	chunks int64
	events int64
	err    error

	fold       folder
	refStarted bool // simulated rank 0 started a step (folding)
}

func newMachine(t Topology, n, S, P, L int, ps *programs, pieces int) *machine {
	m := &machine{t: t, n: n, S: S, P: P, ps: ps, chIdx: map[uint64]int32{}, maxPieces: pieces}
	if S%L != 0 {
		L = S
	}
	m.L, m.copies = int32(L), int32(S/L)
	m.wake, m.netWake = t.SHMWake, t.netWake
	// The executor overlaps a step's large local ops with its messages
	// when a rank has OverlapProcs CPUs or more: hcomm run gives each of
	// a host's ranks its share of the cores.
	m.overlap = t.procs(n) >= exec.OverlapProcs
	m.chunk = int64(t.ChunkBytes)
	if m.chunk <= 0 {
		m.chunk = exec.DefaultChunkBytes
	}
	m.chunk = max(8, m.chunk&^7)
	m.eager = [nClass]int64{min(t.SHMEager, m.chunk), min(t.NetEager, m.chunk), min(t.NetEager, m.chunk)}
	m.slot = max(8, t.SHMEager)
	m.hostsSim, m.racksSim = t.hostsRacks(S)
	pm := t.perMachine()
	m.cores = make([]float64, (m.hostsSim+pm-1)/pm*t.cores())
	m.mem = make([]float64, m.hostsSim)
	m.nicTx = make([]float64, m.hostsSim)
	m.nicRx = make([]float64, m.hostsSim)
	if t.NICBurst > 0 {
		// The buckets start empty, as on links in steady use.
		m.tokens, m.tokT = make([]float64, m.hostsSim), make([]float64, m.hostsSim)
	}
	m.up = make([]float64, m.racksSim)
	m.down = make([]float64, m.racksSim)
	m.ranks = make([]rankState, S)
	if S < n {
		m.markSend, m.markRecv = make([]int32, S), make([]int32, S)
	}
	for c := range m.ranks {
		p := c % P
		lo, hi := ps.steps(p)
		m.ranks[c] = rankState{step: lo, first: lo, last: hi, shift: int32(c - p)}
	}
	return m
}

func (m *machine) stateBytes() int64 {
	b := int64(len(m.ranks))*(100) + int64(cap(m.heap))*16 + int64(len(m.chans))*(56+16)
	for i := range m.ranks {
		b += int64(cap(m.ranks[i].ops)) * int64(200)
	}
	for i := range m.chans {
		b += int64(cap(m.chans[i].q)) * 112
	}
	return b + int64(len(m.cores)+6*len(m.mem))*8
}

// class returns the simulated rank standing for real rank r.
func (m *machine) class(r int32) int32 { return r % int32(m.S) }

func (m *machine) host(r int32) int {
	if m.t.hostOf != nil {
		return int(m.t.hostOf[r])
	}
	return int(r) / m.t.RanksPerHost
}
func (m *machine) simHost(h int) int { return h % m.hostsSim }
func (m *machine) rack(h int) int {
	if m.t.groupOf != nil {
		return int(m.t.groupOf[h])
	}
	if m.t.HostsPerRack <= 0 {
		return 0
	}
	return h / m.t.HostsPerRack
}

// channel returns the channel from real rank from to real rank to; lane 1
// is a second one between them, for a fused exchange's reduced pieces
// (their own messages, awaited apart from the first message's).
func (m *machine) channel(from, to int32, lane uint64) int32 {
	k := uint64(uint32(m.class(from)))<<32 | uint64(uint32(m.class(to))) | lane<<63
	if i, ok := m.chIdx[k]; ok {
		return i
	}
	i := int32(len(m.chans))
	m.chans = append(m.chans, channel{waitRank: -1})
	m.chIdx[k] = i
	return i
}

func (m *machine) keyOf(c int32) int32 { return (c%m.L)*m.copies + c/m.L }

func (m *machine) rankOf(k int32) int32 { return (k%m.copies)*m.L + k/m.copies }

func (m *machine) push(e event) {
	st := &m.ranks[e.rank].ops[e.op]
	st.ev, st.evT = true, e.t
	e.rank = m.keyOf(e.rank)
	m.heap = append(m.heap, e)
	h := m.heap
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (m *machine) pop() event {
	h := m.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			c = r
		}
		if !h[c].less(h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	m.heap = h
	return top
}

// coresOf returns the busy-until times of the cores of simulated host h
// (its machine's).
func (m *machine) coresOf(h int) []float64 {
	c := m.t.cores()
	h /= m.t.perMachine()
	return m.cores[h*c : (h+1)*c]
}

// core reserves the earliest free core of simulated host h at time now
// for work seconds and returns when the work starts.
func (m *machine) core(h int, now, work float64) float64 {
	cs := m.coresOf(h)
	k := 0
	for i := 1; i < len(cs); i++ {
		if cs[i] < cs[k] {
			k = i
		}
	}
	start := max(now, cs[k])
	cs[k] = start + work
	return start
}

// transmit sends a piece of k chunks, b bytes in all, from real rank src to
// real rank dst at time now. It returns when the first chunk and the last
// arrive, the last no earlier than one chunk after lastMin (a forwarded
// piece cannot end before the piece it forwards), and advances bd to the
// first chunk's arrival; the path from there to the last is rest. Over
// shared memory, a warm piece is copied from a slot just written (β times
// m.warm), and the sender's core then spends extra seconds more on it (a
// copy riding the send).
func (m *machine) transmit(src, dst int32, b int64, k int32, now, lastMin, gap float64, bd *Breakdown, warm bool, extra float64) (first, last, rest, start float64, cls int) {
	t := &m.t
	hs, hd := m.host(src), m.host(dst)
	fb := float64(b)
	var dur float64
	switch {
	case hs == hd:
		cls = ClassSHM
		h := m.simHost(hs)
		cs := m.coresOf(h)
		ci := 0
		for i := 1; i < len(cs); i++ {
			if cs[i] < cs[ci] {
				ci = i
			}
		}
		start = max(now, cs[ci], m.mem[h])
		sw := float64(k) * t.SHMSwitch // oversubscribed cores: a switch per chunk
		beta := t.SHM.Beta
		if warm {
			beta *= m.warm
		}
		cs[ci] = start + fb*beta*t.SHMCoreShare + sw + extra
		m.mem[h] = start + fb/t.MemBW
		dur = fb*max(beta, 1/t.MemBW) + sw
	default:
		s, d := m.simHost(hs), m.simHost(hd)
		if t.NetCPU > 0 {
			// The sender's system calls and protocol work hold a core of
			// its host for every chunk; the first leaves once its share
			// is done.
			cpu := m.core(s, now, float64(k)*t.NetCPU)
			bd.Queue += cpu - now
			bd.Alpha += t.NetCPU
			now = cpu + t.NetCPU
		}
		rs, rd := m.rack(hs), m.rack(hd)
		l := t.Net
		bw := min(t.NICBW, t.rxBW())
		start = max(now, m.nicTx[s], m.nicRx[d])
		if rs != rd {
			l = t.Rack
			bw = min(bw, t.UplinkBW)
			rs, rd = rs%m.racksSim, rd%m.racksSim
			start = max(start, m.up[rs], m.down[rd])
			m.up[rs] = start + fb/t.UplinkBW
			m.down[rd] = start + fb/t.UplinkBW
			cls = ClassRack
		} else {
			cls = ClassNet
		}
		m.nicRx[d] = start + fb/t.rxBW()
		dur = fb * max(l.Beta, 1/bw)
		if t.NICBurst > 0 {
			// A token bucket: bytes covered by tokens leave at the line
			// rate, the rest at NICBW; tokens refill at NICBW up to
			// NICBurst.
			line := t.NICLineBW
			tok := min(float64(t.NICBurst), m.tokens[s]+(start-m.tokT[s])*t.NICBW)
			tx := fb / line
			if tok >= fb {
				tok -= fb
			} else {
				tx = tok/line + (fb-tok)/t.NICBW
				tok = 0
			}
			m.tokens[s], m.tokT[s] = tok, start+tx
			m.nicTx[s] = start + tx
			dur = max(tx, fb*max(l.Beta, 1/min(t.rxBW(), line)))
			if cls == ClassRack {
				dur = max(dur, fb/t.UplinkBW)
			}
		} else {
			m.nicTx[s] = start + fb/t.NICBW
		}
	}
	alpha := t.SHM.Alpha
	switch cls {
	case ClassNet:
		alpha = t.Net.Alpha
	case ClassRack:
		alpha = t.Rack.Alpha
	}
	kf := float64(k)
	one := alpha + dur/kf // one chunk
	bd.Queue += start - now
	bd.Alpha += alpha
	bd.Transfer += dur / kf
	bd.Msgs[cls] += int64(k)
	bd.Bytes[cls] += b
	bd.Ranks = [2]int32{dst, src}
	m.chunks += int64(k)
	first = start + one
	// A forwarding op reduces each chunk (gap) before it sends it and
	// receives the next once it is sent: its chunks leave a gap apart.
	last = max(start+kf*one+(kf-1)*gap, lastMin+one)
	return first, last, last - first, start, cls
}

func (m *machine) run() error {
	for c := range m.ranks {
		m.startStep(int32(c), 0, Breakdown{Ranks: [2]int32{int32(c), -1}})
	}
	for len(m.heap) > 0 && m.err == nil {
		e := m.pop()
		m.events++
		c := m.rankOf(e.rank)
		m.ranks[c].ops[e.op].ev = false
		m.advance(c, e.op, e.t)
		if m.refStarted {
			m.refStarted = false
			m.maybeFold(e.t)
		}
	}
	if m.err != nil {
		return m.err
	}
	for c := range m.ranks {
		if rs := &m.ranks[c]; rs.step < rs.last || rs.pending > 0 {
			return fmt.Errorf("sim: deadlock: rank %d stuck in step %d", c, rs.step)
		}
	}
	return nil
}

// startStep starts rank c's next steps at time now, running their local
// ops and scheduling their communication.
func (m *machine) startStep(c int32, now float64, bd Breakdown) {
	rs := &m.ranks[c]
	for {
		if rs.step == rs.last {
			if now > m.end || m.end == 0 {
				m.end, m.endBd = now, bd
			}
			return
		}
		ops := m.ps.step(rs.step)
		rs.step++
		rs.fused = false
		if m.fuse && len(ops) == 2 && ops[0].fl&flX != 0 && rs.step < rs.last && m.host(m.mv(ops[0].peer, rs.shift)) == m.host(c) {
			// The executor runs this step and the next as one fused
			// exchange with the peer over shared memory.
			ops = m.fusedOps(ops, m.ps.step(rs.step))
			rs.step++
			rs.fused = true
		}
		m.refStarted = m.fold.on && c == 0
		rs.ops = rs.ops[:0]
		rs.stepStart = now
		m.stamp++
		h := m.simHost(m.host(c))
		// A large copy of what the step sends to a rank of the host rides
		// the send (exec.CopySendMin).
		ride := m.fuse && m.rides(c, ops)
		// Local ops run first, or beside the messages when large enough
		// and the executor overlaps them (lnow, lbd: their own clock and
		// path; the step ends when both are done).
		lnow, lbd := now, bd
		lb := localBytes(ops)
		if ride {
			for i := range ops {
				if ops[i].fl&flRide != 0 {
					lb -= ops[i].bytes
				}
			}
		}
		overlap := m.overlap && lb >= exec.OverlapMin
		for i := range ops {
			o := &ops[i]
			if ride && o.fl&flRide != 0 {
				continue
			}
			if o.local() {
				work := float64(o.bytes) * m.t.CopyBeta
				if o.kind == sched.LocalReduce {
					work = float64(o.bytes) * m.t.Gamma
				}
				start := m.core(h, lnow, work)
				lbd.Queue += start - lnow
				lbd.Local += work
				lnow = start + work
				if !overlap {
					now, bd = lnow, lbd
				}
				continue
			}
			st := opState{bytes: o.bytes, kind: o.kind, peer: m.mv(o.peer, rs.shift), to: m.mv(o.to, rs.shift),
				inCh: -1, outCh: -1, bd: bd, chunk: m.chunk, carry: ride && o.fl&flCarry != 0}
			// A fused exchange moves ring slots: its first message each
			// way (lane 0), and the reduced pieces, sent as they are
			// reduced into the slot (lane 1: warm) and landed.
			var lane1in, lane1out uint64
			if rs.fused {
				st.chunk = m.slot
				if o.kind == sched.RecvReduceSend {
					st.warm, lane1out = true, 1
				}
				if o.kind == sched.Recv {
					lane1in = 1
				}
			}
			chunks := max(1, (o.bytes+st.chunk-1)/st.chunk)
			per := (chunks + int64(m.maxPieces) - 1) / int64(m.maxPieces)
			st.per = int32(per)
			st.nch = int32((chunks + per - 1) / per)
			if dst, ok := sendsTo(o.kind, st.peer, st.to); ok {
				if m.S < m.n && lane1out == 0 && !m.claim(dst, false) {
					m.err = fmt.Errorf("sim: rank %d sends to two ranks of one class in a step", c)
					return
				}
				st.outCh = m.channel(c, dst, lane1out)
			}
			if o.kind != sched.Send {
				if m.S < m.n && lane1in == 0 && !m.claim(st.peer, true) {
					m.err = fmt.Errorf("sim: rank %d receives from two ranks of one class in a step", c)
					return
				}
				st.inCh = m.channel(st.peer, c, lane1in)
			}
			rs.ops = append(rs.ops, st)
			m.push(event{t: now, rank: c, op: int32(len(rs.ops) - 1)})
		}
		rs.stepEnd, rs.stepBd = now, bd
		if overlap && lnow > now {
			rs.stepEnd, rs.stepBd = lnow, lbd
		}
		rs.pending = int32(len(rs.ops))
		if rs.pending > 0 {
			return
		}
		m.traceStep(c)
	}
}

// localBytes returns the bytes a step's local ops write.
func localBytes(ops []cop) int64 {
	var b int64
	for i := range ops {
		if ops[i].local() {
			b += ops[i].bytes
		}
	}
	return b
}

// fusedOps returns the ops of steps a and b of a program run as one
// fused exchange (flX; sched.PairExchange: a = {Send(q, A), RecvReduce(q,
// B, D)}, b = {Send(q, D), Recv(q, C)}): A sent, the peer's first message
// received and reduced piece by piece, each reduced piece sent back as it
// is made (a RecvReduceSend to q: b's Send of D is that), the peer's
// reduced pieces received into C.
func (m *machine) fusedOps(a, b []cop) []cop {
	snd, rr := a[0], a[1]
	if snd.kind != sched.Send {
		snd, rr = rr, snd
	}
	rcv := b[1]
	if rcv.kind != sched.Recv {
		rcv = b[0]
	}
	rr.kind, rr.to = sched.RecvReduceSend, rr.peer
	m.fx = [3]cop{snd, rr, rcv}
	return m.fx[:]
}

// rides reports whether a copy of step ops rides a send (flRide, flCarry)
// for rank c: the send goes to a rank of its host, over shared memory,
// whose transport hands each piece it copied to the copy.
func (m *machine) rides(c int32, ops []cop) bool {
	for i := range ops {
		if ops[i].fl&flCarry != 0 {
			return m.host(m.mv(ops[i].peer, m.ranks[c].shift)) == m.host(c)
		}
	}
	return false
}

// claim marks the class of real rank r as used by a send (recv false) or
// a receive of this step and reports whether it was free.
func (m *machine) claim(r int32, recv bool) bool {
	mk := m.markSend
	if recv {
		mk = m.markRecv
	}
	k := m.class(r)
	if mk[k] == m.stamp {
		return false
	}
	mk[k] = m.stamp
	return true
}

func (m *machine) mv(r, shift int32) int32 {
	if m.xor {
		return r ^ shift
	}
	return int32((int64(r) + int64(shift)) % int64(m.n))
}

func sendsTo(k sched.Kind, peer, to int32) (int32, bool) {
	switch k {
	case sched.Send:
		return peer, true
	case sched.RecvReduceSend, sched.RecvCopySend:
		return to, true
	}
	return 0, false
}

// piece returns the bytes and chunks of op st's piece in progress.
func (m *machine) piece(st *opState) (bytes int64, chunks int32) {
	span := int64(st.per) * st.chunk
	lo := int64(st.i) * span
	b := min(span, st.bytes-lo)
	return b, int32(max(1, (b+st.chunk-1)/st.chunk))
}

// advance handles an event of op o of rank c at time now.
func (m *machine) advance(c, o int32, now float64) {
	st := &m.ranks[c].ops[o]
	switch st.phase {
	case phStart:
		if st.kind == sched.Send {
			m.send(c, o, now)
		} else {
			m.need(c, o, now)
		}
	case phArrived:
		// The piece's first chunk is here (now) and its last arrives at
		// st.lastMin. Chunk by chunk, the executor reduces (and forwards)
		// each chunk as it comes: a piece of k chunks c bytes each ends
		// one chunk's work after its last chunk, or after the work of all
		// k if that is longer.
		b, k := m.piece(st)
		last := st.lastMin
		reduces := st.kind == sched.RecvReduce || st.kind == sched.RecvReduceSend
		work, one := 0.0, 0.0
		start := now
		if reduces {
			work = float64(b) * m.t.Gamma
			one = work / float64(k)
			start = m.core(m.simHost(m.host(c)), now, work)
			st.bd.Queue += start - now
		}
		st.phase = phGot
		if st.outCh >= 0 {
			// Forward from the first chunk on.
			st.bd.Reduce += one
			st.lastMin = last + one
			st.gap = one
			if t := start + one; t > now {
				m.push(event{t: t, rank: c, op: o})
				return
			}
			m.send(c, o, now)
			return
		}
		done := max(last+one, start+work)
		if last > start {
			st.bd.Transfer += last - start
			st.bd.Reduce += done - last
		} else {
			st.bd.Reduce += done - start
		}
		if done > now {
			m.push(event{t: done, rank: c, op: o})
			return
		}
		m.next(c, o, now)
	case phGot:
		if st.outCh >= 0 {
			m.send(c, o, now)
			return
		}
		m.next(c, o, now)
	case phSent:
		m.next(c, o, now)
	}
}

func (m *machine) next(c, o int32, now float64) {
	st := &m.ranks[c].ops[o]
	st.i++
	st.lastMin = 0
	if st.i < st.nch {
		if st.kind == sched.Send {
			m.send(c, o, now)
		} else {
			m.need(c, o, now)
		}
		return
	}
	rs := &m.ranks[c]
	if now >= rs.stepEnd {
		rs.stepEnd, rs.stepBd = now, st.bd
	}
	rs.pending--
	if rs.pending == 0 {
		m.traceStep(c)
		m.startStep(c, rs.stepEnd, rs.stepBd)
	}
}

// send transmits op o's piece st.i at time now.
func (m *machine) send(c, o int32, now float64) {
	st := &m.ranks[c].ops[o]
	dst := st.peer
	if st.kind != sched.Send {
		dst = st.to
	}
	b, k := m.piece(st)
	before := st.bd
	// A copy riding the send copies each piece from its slot once sent,
	// from the cache, before the next piece.
	extra := 0.0
	if st.carry {
		extra = float64(b) * m.t.CopyBeta * m.warm
	}
	first, last, rest, start, cls := m.transmit(c, dst, b, k, now, st.lastMin, st.gap, &st.bd, st.warm, extra)
	it := item{first: first, last: last, bd: st.bd}
	st.phase = phSent
	if st.kind == sched.Send && st.nch == 1 && b <= m.eager[cls] {
		// The executor hands a small send to the transport, which
		// buffers it (transport.Eager): the op is done once the
		// resources are free.
		st.bd = before
		st.bd.Queue += start - now
		m.push(event{t: start, rank: c, op: o})

	} else {
		st.bd.Transfer += rest // the op moves on when the last chunk is there
		if extra > 0 {
			st.bd.Local += extra
		}
		m.push(event{t: last + extra, rank: c, op: o})
	}
	ch := &m.chans[st.outCh]
	if ch.waitRank >= 0 {
		wr, wo := ch.waitRank, ch.waitOp
		ch.waitRank = -1
		m.deliver(wr, wo, it, now)
		return
	}
	if ch.head == len(ch.q) {
		ch.q, ch.head = ch.q[:0], 0
	}
	ch.q = append(ch.q, it)
}

// need makes op o wait for its chunk st.i.
func (m *machine) need(c, o int32, now float64) {
	st := &m.ranks[c].ops[o]
	ch := &m.chans[st.inCh]
	if ch.head < len(ch.q) {
		it := ch.q[ch.head]
		ch.head++
		m.deliver(c, o, it, now)
		return
	}
	st.phase = phWait
	ch.waitRank, ch.waitOp = c, o
}

// deliver hands piece it to op o, which is waiting for it at time now.
func (m *machine) deliver(c, o int32, it item, now float64) {
	st := &m.ranks[c].ops[o]
	t := now
	if it.first >= now {
		// The op waited for the piece: the path runs through the sender.
		st.bd, t = it.bd, it.first
		if m.host(st.peer) == m.host(c) {
			if m.wake > 0 {
				// Oversubscribed: the rank sees it at its next turn on a core.
				t += m.wake
				st.bd.Queue += m.wake
			}
		} else if m.netWake > 0 {
			// The machine's cores run more ranks than they are.
			t += m.netWake
			st.bd.Queue += m.netWake
		}
	}
	st.lastMin = it.last
	st.phase = phArrived
	m.push(event{t: t, rank: c, op: o})
}
