// Package tcp implements transport.Transport over TCP, for ranks on
// different hosts.
//
// # Connections
//
// Each pair of ranks (a, b) with a < b shares NSocks connections per
// network path, all dialed by a: a rank dials the higher ranks and accepts
// the lower ones. A rank may publish several listener addresses (see
// Config.Addrs), each a path: the dialer first finds which of them it
// reaches, drops the others with a log line as long as one remains, and
// tells the listener in every handshake which paths it connects on. Either side
// may ask for the pair first. The dialer dials on its first call to the
// peer (or in Connect), retrying with backoff until Config.ConnectTimeout
// passes, since the peer may not answer yet; the accepting side waits, for as
// long as the caller's context allows, for the dialer to come (see Failure
// for peers that are gone).
//
// The dialer opens every connection with a challenge-response (see
// wire.Handshake): it introduces itself (communicator id, both ranks, the
// world size, the connection's index) with a fresh nonce; the listener
// answers with a fresh nonce of its own; the dialer proves it holds the job
// token with an HMAC over all of it; and only then does the listener
// believe the introduction, check it against its own configuration, and
// answer with a verdict carrying its own proof, which the dialer checks. No
// value that crosses the wire can be replayed on another connection, and a
// stranger who connects learns nothing it could test token guesses
// against. A listener refuses an unproven dialer without saying anything
// about itself, and a proven one with a reason, which it also logs; a
// dialer that is refused fails at once with a *RefusedError instead of
// retrying until its timeout. The handshake authenticates the peers, not
// the frames that follow: the data stream is neither encrypted nor
// protected against an attacker on the path.
//
// Connections still in their handshake are limited, in all and per source
// address; past a limit the oldest unproven connection of the heaviest
// source is closed, so a rank that answers its challenge at once gets
// through a flood, and a connection whose proof verified no longer counts.
// Each must finish within 10 seconds (or ConnectTimeout). Refusals are
// logged at most once per 10 seconds, as a count with a sample.
//
// # Frames
//
// Messages travel as data frames (see wire.FrameHeader): a header carrying
// the fingerprint and the message length, written together with the payload
// in one vectored write, and read straight into the caller's buffer.
// Messages of 64 KiB and more are cut into stripes moved at once over the
// pair's paths, in proportion to each path's estimated throughput, and
// evenly over a path's connections; smaller ones travel on connection 0.
// The sender alone decides the cut: the first stripe, on connection 0,
// names the paths the others travel on, and the receiver lays their
// lengths end to end in connection order. See Transport.Paths for the
// estimates.
//
// Messages of up to 16 KiB are latency-bound. TrySend (transport.Eager)
// writes them on the caller's goroutine, and a Recv expecting one polls
// the socket with non-blocking reads for up to Config.PollFor (50 µs)
// before it leaves the wait to the Go netpoller, whose wake-ups cost tens
// of microseconds on virtual machines; the polling lets the process's other
// goroutines run between reads, yields the CPU (Config.Yield) when ranks
// outnumber CPUs, and stops while a Send runs beside it. A polled header
// read takes up to 4 KiB from the socket, so a small frame's payload and
// the small frames queued behind it are read in one system call.
//
// Recv reads the header before it touches the caller's buffer. A message
// that does not match the receive (another fingerprint, or another length
// that still fits the buffer) is read in full, keeping the stream in step,
// and reported as an *errs.MismatchError. A message longer than the buffer
// is not read: the pair's connections are closed, the call reports the
// mismatch and later calls on that peer report it lost. A frame that breaks
// the protocol closes the pair's connections likewise, and is logged.
//
// A call interrupted by its context part way through a frame leaves the
// stream out of step: the pair's connections are closed, and later calls on
// that peer fail with an *errs.PeerError (ErrPeerLost). A call whose context
// ends before it moved a byte leaves the pair usable.
//
// # Failure
//
// Abort fails local calls at once and, before it returns, sends an abort
// frame on every connection whose stream is at a frame boundary and shuts
// its sending side (waiting at most 200 ms for the kernel to take the
// frames, so that they reach the peers even if the process exits right
// after); then, in the background, it keeps discarding what peers still
// send, so peers blocked sending to this rank move on to a receive that
// reports the abort. When the cause is the loss of a rank, the frame names
// that rank (wire.FlagLost) and the receiver reports it, not the
// messenger, as lost. (A connection left part way through a frame by the
// abort is only shut; its peer sees it lost rather than aborted.) A peer's
// abort frame, or the end of its connection, fails every call waiting on
// it with an *errs.PeerError and closes the pair's connections; a Send
// blocked on a peer that died fails with the write error as soon as the
// peer's host resets the connection.
//
// A peer that never connected is not waited for blindly. Its listener was
// bound before its address was published, so a dial refused three times in
// a row (ECONNREFUSED) means it is gone: the dialer reports it lost at
// once instead of retrying until ConnectTimeout. A rank waiting to be
// dialed by a lower rank checks every 200 ms or so that the lower rank
// still listens (a connection closed at once, which the listener ignores),
// and reports it lost when it refuses.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

const (
	// DefaultConnectTimeout bounds a dialing sequence when
	// Config.ConnectTimeout is zero.
	DefaultConnectTimeout = 30 * time.Second
	// DefaultPollFor is how long a receive polls its socket for the next
	// frame before it leaves the wait to the network poller, when
	// Config.PollFor is zero. A poller wake-up costs tens of microseconds
	// on virtual machines (a thread blocked in epoll_wait must be woken and
	// scheduled), where a message between busy ranks arrives within a few;
	// 50 µs is also Linux's suggested net.core.busy_read.
	DefaultPollFor = 50 * time.Microsecond
	// DefaultStallAfter is Config.StallAfter when zero.
	DefaultStallAfter = time.Second
	// DefaultPingEvery is Config.PingEvery when zero.
	DefaultPingEvery = time.Second
	// DefaultDeadAfter is Config.DeadAfter when zero.
	DefaultDeadAfter = 20 * time.Second
	// MaxSockets is the largest Config.NSocks accepted.
	MaxSockets = 64

	// handshakeTimeout bounds how long an accepted connection may take
	// through its handshake.
	handshakeTimeout = 10 * time.Second
	// abortWriteTimeout bounds the write of an abort frame.
	abortWriteTimeout = 200 * time.Millisecond
)

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Eager     = (*Transport)(nil)
)

// Config configures a Transport.
type Config struct {
	// Rank is this rank, in [0, Size); Size is the number of ranks.
	Rank, Size int
	// Token is the job's shared secret; peers that present another one are
	// refused.
	Token [32]byte
	// CommID identifies the communicator; peers of another communicator
	// are refused.
	CommID uint64
	// Job identifies the job, if the caller knows an identity all ranks
	// share; it is bound into the handshake's proofs, so that ranks of
	// another job with the same token are refused. "" means none.
	Job string
	// Listener is this rank's listener, already bound before its address
	// was published to the other ranks (who take a refused connection for
	// a rank that is gone). The Transport owns it and
	// closes it in Close.
	Listener net.Listener
	// Addrs[r] is rank r's listener address, or "" for ranks not reached
	// over tcp. Only the addresses of higher ranks are dialed. A rank
	// with several network paths gives a comma-separated list (at most
	// MaxPaths), one address per path, all served by its one listener;
	// this rank's own entry, if not "", says how many it has.
	Addrs []string
	// LinkRate, if not nil, gives the speed in bytes/s of the link
	// carrying a local address (0 if unknown): a path's starting weight.
	LinkRate func(local net.IP) float64
	// Weights says how large messages are shared among paths: "" or
	// "measured", in proportion to each path's throughput as measured
	// (starting from LinkRate); "speed", to LinkRate only; "equal",
	// evenly.
	Weights string
	// StallAfter is how long a connection of a pair with several paths
	// may hold a stripe of a message without the peer's host
	// acknowledging any of it before its path is retired and the
	// stripes sent again on the pair's first path (or, for the first
	// path's own lead stream, before that moves to another path: see
	// lead.go): 0 means DefaultStallAfter, a negative value never
	// retires a path.
	StallAfter time.Duration
	// PingEvery is how often the idle connections of a pair's paths
	// other than its first are pinged (wire.FramePing), so that a path
	// that stops while idle is retired, after StallAfter without an
	// acknowledgement, before a message needs it: 0 means
	// DefaultPingEvery, a negative value never pings.
	PingEvery time.Duration
	// DeadAfter is how long a connection may go without an answer from
	// its peer's host (data unacknowledged, or keepalive probes
	// unanswered while idle) before it fails and the peer is lost: 0
	// means DefaultDeadAfter, a negative value leaves the system's
	// defaults (minutes).
	DeadAfter time.Duration
	// NSocks is the number of connections per pair of ranks, over which
	// large messages are striped; 0 means 1. Both ends must agree.
	NSocks int
	// Checksum adds a CRC32C of the payload to every data frame this rank
	// sends (HCOMM_CHECKSUM). Frames that carry one are verified whatever
	// the receiver's setting; a frame that fails is reported as corruption
	// and the pair's connections are closed.
	Checksum bool
	// PollFor is how long a receive polls the socket for the next frame
	// with non-blocking reads before blocking in the network poller: 0
	// means DefaultPollFor, a negative value never polls. Yield gives the
	// CPU away (sched_yield) between polls, for hosts with more ranks than
	// CPUs.
	PollFor time.Duration
	Yield   bool
	// ConnectTimeout bounds each dialing sequence, and Connect's wait for
	// lower ranks to dial; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Logger receives refused connections and protocol violations; nil
	// discards them.
	Logger *slog.Logger
}

// RefusedError reports that a peer turned this rank's connection away
// during the handshake. Calls on that peer fail with an *errs.PeerError
// whose Cause is the RefusedError.
type RefusedError struct {
	Peer   int
	Addr   string
	Reason string

	elsewhere bool  // the listener at Addr is not Peer's (see elsewhere)
	cause     error // a *wire.VersionError, or nil
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("tcp: rank %d at %s refused the connection: %s", e.Peer, e.Addr, e.Reason)
}

// Unwrap returns the refusal's cause when it is known: a *wire.VersionError
// (matching wire.ErrVersion) when the listener speaks another protocol
// version.
func (e *RefusedError) Unwrap() error { return e.cause }

// Transport states.
const (
	stateOpen int32 = iota
	stateAborted
	stateClosed
)

// Transport is a transport.Transport over TCP. Create it with New; it is safe
// for the concurrent use the transport.Transport contract allows.
type Transport struct {
	rank, size     int
	crc            bool
	pollFor        time.Duration // <= 0: no polling
	yield          bool
	sending        atomic.Int32 // Sends in progress on other goroutines than TrySend's
	key            [32]byte     // proves handshakes: wire.HandshakeKey(token, job)
	commID         uint64
	nsocks         int
	connectTimeout time.Duration
	addrs          []string
	paths          [][]string // addrs split: each rank's listener addresses
	ownPaths       int        // this rank's listener addresses, 0 if not given
	linkRate       func(net.IP) float64
	fixedWeights   bool          // weights stay as they start
	deadAfter      time.Duration // <= 0: the system's defaults
	stallAfter     time.Duration // <= 0: paths are never retired
	reprobeMax     time.Duration // longest wait between dials of an absent path (redial.go)
	pingEvery      time.Duration // <= 0: no idle pings (ping.go)
	ln             net.Listener
	log            *slog.Logger
	peers          []*peer // by rank; nil for this rank

	// onWaitConn, set by tests before use, is called when a call starts
	// waiting for the connections to peer.
	onWaitConn func(peer int)
	// testSend, set by tests before use, writes a stripe in place of
	// conn.writeStripe.
	testSend func(c *conn, fp wire.Fingerprint, off uint64, part []byte) (int64, error)
	// testTook, set by tests before use, is called when a receive takes
	// the answer of the worker receiving a stripe on connection pos.
	testTook func(pos int, err error)
	// testRedial, set by tests before use, is called before generation
	// gen of path k is dialed (redial.go); when it reports true, the
	// dialing fails after the listener accepted each connection, as when
	// the answer comes after the attempt's bound.
	testRedial func(k int, gen uint8) (late bool)
	// testPinged, set by tests before use, is called after each round of
	// idle pings to a peer (ping.go).
	testPinged func(peer int)
	// testPingStall, set by tests before use, makes the pinger take the
	// idle connection c as stalled when it reports true (ping.go).
	testPingStall func(c *conn) bool
	// testAcked, set by tests before use, may lower what a lead stream's
	// peer host is taken to have acknowledged (lead.go).
	testAcked func(c *conn, acked uint64) uint64
	// testStall, set by tests before use, makes the lead's watch take the
	// send lead c as stalled at once when it reports true; testLeadAt is
	// called where a Send waits on the lead ("await": for the whole
	// lead's acknowledgement; "quiet": for the small frames' before a
	// message larger than keptMax; "acks": for a stripe on the lead's
	// path's other sockets).
	testStall  func(c *conn) bool
	testLeadAt func(where string)
	// testLost, set by tests before use, makes a frame written on the
	// send lead c vanish (as into a link that went down) when it reports
	// true: kept for a move, never put on the socket.
	testLost func(c *conn) bool
	// testCutLost, set by tests before use, makes the first bytes of a
	// frame testLost loses reach the peer after all: as many as it
	// returns.
	testCutLost func(c *conn) int64
	// testMoveTo, set by tests before use, is called with the connection
	// a move of the send lead is about to write its lead frame on
	// (lead.go).
	testMoveTo func(next *conn)
	// testCutMove, set by tests before use, makes a move's lead frame on
	// next stop after the number of bytes it returns (0: not cut), as a
	// connection failing in the middle of the write would.
	testCutMove func(next *conn) int64
	// testLoseMove, set by tests before use, makes a move's lead frame on
	// next lost on the way when it reports true: counted as written,
	// nothing goes on the socket.
	testLoseMove func(next *conn) bool
	// testKeptMax, set by tests before use, lowers keptMax (0: keptMax).
	testKeptMax uint64

	ctx    context.Context // done on Abort or Close
	cancel context.CancelFunc

	state      atomic.Int32
	mu         sync.Mutex                // guards the fields below and wg.Add
	abortErr   error                     // what calls return after Abort
	abortText  string                    // the cause given to Abort, as text
	abortFrame []byte                    // the abort frame sent to peers
	pending    map[*pendingConn]struct{} // accepted connections in their handshake
	perSource  map[string]int            // unproven pending connections by IP address
	unproven   int                       // unproven pending connections in all
	refusals   refusalLog
	wg         sync.WaitGroup
}

// peer is this rank's side of a pair of ranks.
type peer struct {
	t    *Transport
	rank int

	mu       sync.Mutex
	slots    []*conn // by handshake socket index (path * NSocks + slot), filled as connections come up
	reserved []bool  // socket index taken by a handshake in progress
	mask     uint16  // the paths in use, once known (dialer: found; listener: told)
	have     int
	closed   bool
	reprobe  uint16        // paths the dialer found not to answer: dialed again in the background (redial.go)
	ready    chan struct{} // closed once all connections are up

	// Set once ready, then read-only: the connections in use (conns[0]
	// carries small messages and the first stripe of large ones) and
	// their paths.
	conns []*conn
	paths []*path

	cut     []uint64  // plan's bytes per connection (send gate)
	sampled time.Time // when the paths' rates were last sampled (send gate)
	pshare  [MaxPaths]float64
	rparts  []*conn // stripedParts' result (receive gate)

	dialOnce  sync.Once
	probeOnce sync.Once
	failure   atomic.Pointer[error]
	failed    chan struct{} // closed when failure is set

	send, recv gate
	sendW      []*worker // by position (none runs for the lead's)
	recvW      []*worker
	sdone      chan result // the send workers' answers
	rdone      chan result // the receive workers' answers

	// Failover (failover.go), set up once ready.
	multi    bool         // several paths: receives watch conn 0 for repairs
	failover bool         // several paths and the kernel tells acknowledgements: sends repair
	sstate   []uint8      // by conn: the current send's stripe state (send gate)
	soff     []uint64     // by conn: where its stripe starts (send gate)
	stimer   *time.Timer  // stall checks (send gate)
	rwait    atomic.Int32 // receive stripes not yet in (receive gate)
	rinwait  atomic.Bool  // the receive waits in recv.waitLead (leadwait.go)
	rext     []extent     // the current receive's stripes (receive gate)
	rgone    uint16       // paths the peer retired: not read again (receive gate)

	// Re-dial (redial.go). Each direction uses the connections of its
	// view, by position: conns at first; a retired path's connections
	// dialed again once that direction moved to them.
	sview      []*conn         // send gate (written under mu)
	rview      []*conn         // receive gate
	sgen, rgen [MaxPaths]uint8 // the generation each direction uses, by path (under mu)
	gens       []*generation   // connections dialed again (under mu)
	newGen     chan struct{}   // closed, and replaced, when a generation is complete (under mu)
	rejoinable atomic.Uint32   // paths with a complete generation newer than sgen's

	// Idle pings (ping.go).
	sidle  sync.Mutex  // held by Send: the pinger works only between sends
	untold uint16      // paths the pinger retired, not yet told to the peer (under sidle; ping.go)
	pinged []time.Time // by position: when the pinger last wrote a ping (pinger only)
	// The lead streams (lead.go): conns[0] at first, each direction's
	// own after a move.
	sl       *conn      // send lead (smu; written under mu)
	slOld    *conn      // the send lead before the last move (as sl): the peer may read it still
	rl       *conn      // receive lead (receive gate; written under mu)
	rlOld    *conn      // the receive lead before the last move (as rl)
	rentry   *conn      // the receive lead locked by the receive in progress
	leadOK   bool       // the lead moves when its path stops
	smu      sync.Mutex // a Send, or the watch moving the send lead
	llog     *leadLog   // copy of the small frames on sl (smu)
	seg      leadSeg    // the Send's large frame on sl (smu)
	segx     []leadSeg  // the frames after it in the Send, such as repairs (smu)
	moveSaid bool       // moveLead said why the lead cannot move (smu)
	moveBufs [][]byte   // moveLead's (smu)
	// Where sl's own bytes stand in the lead stream, whose offsets
	// count its bytes across moves (lead.go): sl's stream offset slcs
	// is the lead stream's slres; sl took the lead at the lead stream's
	// slfrom (smu).
	slres, slcs, slfrom uint64
	sstalled            atomic.Bool  // the watch found sl stalled
	sfollow             atomic.Bool  // sstalled because the peer moved its lead off sl's path
	sto                 atomic.Int32 // 1 + the path the peer last moved its lead onto (a move's first choice)
	rmove               atomic.Bool  // the watch found a lead frame: a receive joins
	rhdrWait            atomic.Bool  // a receive waits for a header on the lead
	rstripe             atomic.Bool  // the watch found a stripe while it did
	rpre                uint16       // positions whose stripe the receive read before the header
	rkeep               atomic.Bool  // the watch saw a stripe ahead of an idle lead for a while
	rkept               []keptStripe // stripes of a later message read ahead of a lead frame (receive gate)
	rbig                bool         // the receive left a stripe too large to keep (receive gate)
	rbody               atomic.Bool  // a receive reads a message's first frame's payload on the lead
	rstill              int          // wake-ups in a row with a stripe ahead and no byte on the lead (receive gate)
	rstillAt            uint64       // the lead's rread at the last of them (receive gate)
}

// New returns a Transport for cfg and starts accepting connections on
// cfg.Listener. It connects nothing yet: see Connect.
func New(cfg Config) (*Transport, error) {
	switch {
	case cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size:
		return nil, fmt.Errorf("tcp: rank %d in a world of %d: %w", cfg.Rank, cfg.Size, errs.ErrInvalidArgument)
	case cfg.Listener == nil:
		return nil, fmt.Errorf("tcp: no listener: %w", errs.ErrInvalidArgument)
	case len(cfg.Addrs) != cfg.Size:
		return nil, fmt.Errorf("tcp: %d addresses for %d ranks: %w", len(cfg.Addrs), cfg.Size, errs.ErrInvalidArgument)
	case cfg.NSocks < 0 || cfg.NSocks > MaxSockets:
		return nil, fmt.Errorf("tcp: %d sockets per peer, want 1 to %d: %w", cfg.NSocks, MaxSockets, errs.ErrInvalidArgument)
	case cfg.Weights != "" && cfg.Weights != "measured" && cfg.Weights != "speed" && cfg.Weights != "equal":
		return nil, fmt.Errorf("tcp: weights %q, want measured, speed or equal: %w", cfg.Weights, errs.ErrInvalidArgument)
	case cfg.ConnectTimeout < 0:
		return nil, fmt.Errorf("tcp: negative connect timeout: %w", errs.ErrInvalidArgument)
	}
	t := &Transport{
		rank:           cfg.Rank,
		size:           cfg.Size,
		key:            wire.HandshakeKey(&cfg.Token, cfg.Job),
		commID:         cfg.CommID,
		nsocks:         max(cfg.NSocks, 1),
		crc:            cfg.Checksum,
		pollFor:        cfg.PollFor,
		yield:          cfg.Yield,
		connectTimeout: cfg.ConnectTimeout,
		addrs:          append([]string(nil), cfg.Addrs...),
		paths:          make([][]string, cfg.Size),
		linkRate:       cfg.LinkRate,
		fixedWeights:   cfg.Weights == "speed" || cfg.Weights == "equal",
		deadAfter:      cfg.DeadAfter,
		stallAfter:     cfg.StallAfter,
		pingEvery:      cfg.PingEvery,
		ln:             cfg.Listener,
		log:            cfg.Logger,
		peers:          make([]*peer, cfg.Size),
		pending:        make(map[*pendingConn]struct{}),
		perSource:      make(map[string]int),
	}
	for r, a := range cfg.Addrs {
		t.paths[r] = splitAddrs(a)
		if len(t.paths[r]) > MaxPaths {
			return nil, fmt.Errorf("tcp: rank %d has %d addresses, at most %d paths: %w", r, len(t.paths[r]), MaxPaths, errs.ErrInvalidArgument)
		}
	}
	t.ownPaths = len(t.paths[cfg.Rank])
	if cfg.Weights == "equal" {
		t.linkRate = nil
	}
	if t.deadAfter == 0 {
		t.deadAfter = DefaultDeadAfter
	}
	t.reprobeMax = reprobeMax
	if t.pingEvery == 0 {
		t.pingEvery = DefaultPingEvery
	}
	if t.stallAfter == 0 {
		t.stallAfter = DefaultStallAfter
	}
	if t.connectTimeout == 0 {
		t.connectTimeout = DefaultConnectTimeout
	}
	if t.pollFor == 0 {
		t.pollFor = DefaultPollFor
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.log = t.log.With("transport", "tcp", "rank", t.rank)
	t.refusals = refusalLog{log: t.log, every: refusalLogEvery}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for r := range t.peers {
		if r == t.rank {
			continue
		}
		t.peers[r] = &peer{
			t:      t,
			rank:   r,
			ready:  make(chan struct{}),
			failed: make(chan struct{}),
			send:   gate{write: true},
		}
	}
	t.spawn(t.acceptLoop)
	return t, nil
}

// Rank returns this rank.
func (t *Transport) Rank() int { return t.rank }

// Size returns the number of ranks.
func (t *Transport) Size() int { return t.size }

// Connect sets up the connections to peers now rather than on first use.
// Both ranks of a pair should call it: the lower one dials, the higher one
// waits for it, for at most ConnectTimeout.
func (t *Transport) Connect(ctx context.Context, peers []int) error {
	for _, r := range peers {
		if _, err := t.lookup(r); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, t.connectTimeout)
	defer cancel()
	for _, r := range peers {
		if r > t.rank {
			if err := t.startDial(t.peers[r]); err != nil {
				return err
			}
		}
	}
	for _, r := range peers {
		if _, err := t.connected(cctx, r); err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("tcp: rank %d did not connect within %v: %w", r, t.connectTimeout, errs.ErrTimeout)
			}
			return err
		}
	}
	return nil
}

// Send sends p to peer as one message under fingerprint fp. It returns once
// p is handed to the kernel, so p may be reused; except that on a pair with
// several paths, a message striped over them returns only once the peer's
// host has acknowledged the stripes on paths other than the first (until
// then they may have to go again on the first: see failover.go), which a
// peer whose receive window stays full can hold up.
func (t *Transport) Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	// While a send runs beside it, a receive does not poll: the two would
	// compete for the CPU the sender and the peer need.
	t.sending.Add(1)
	defer t.sending.Add(-1)
	return t.send(ctx, peer, fp, p)
}

func (t *Transport) send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	pr, err := t.connected(ctx, peer)
	if err != nil {
		return err
	}
	if !pr.send.enter(ctx) {
		return t.deadErr(ctx, pr)
	}
	defer pr.send.exit()
	pr.sidle.Lock()
	defer pr.sidle.Unlock()
	if pr.leadOK {
		// The lead's watch may move the lead between Sends (lead.go).
		pr.smu.Lock()
		defer pr.smu.Unlock()
		if err := pr.leadStalled("send"); err != nil && err != errNoMove {
			return t.ioFailed(ctx, pr, err, true, "send")
		}
	}
	if pr.untold != 0 {
		if err := pr.tellRetired(ctx, fp); err != nil {
			return t.ioFailed(ctx, pr, err, true, "send")
		}
	}
	total := uint64(len(p))
	if total >= stripeMin && pr.rejoinable.Load() != 0 {
		// A retired path was dialed again: move to it (redial.go).
		if err := pr.rejoinSend(ctx); err != nil {
			return t.ioFailed(ctx, pr, err, true, "send")
		}
	}
	if total > t.keptMax() && len(pr.conns) > 1 && pr.leadOK && pr.llog.held() > 0 {
		// A stripe of it may be larger than the receiver keeps ahead
		// of a lead frame: it goes out only once the small frames
		// before it are acknowledged (lead.go, leadQuiet).
		if err := pr.leadQuiet(ctx); err != nil {
			return t.ioFailed(ctx, pr, err, true, "send")
		}
	}
	var mask uint16
	var now time.Time
	if total >= stripeMin && len(pr.conns) > 1 {
		now = time.Now()
		mask = pr.plan(total, now)
	}
	c0 := pr.sl
	if mask == 0 {
		h := wire.FrameHeader{Type: wire.FrameData, Len: total, Total: total, Fingerprint: *fp}
		n, err := pr.leadWrite(ctx, &h, p)
		if err == nil && pr.seg.on {
			err = pr.awaitLead(ctx)
		}
		if err != nil {
			return t.ioFailed(ctx, pr, err, n > 0, "send")
		}
		c0.path.sent.Add(total)
		return nil
	}
	pr.send.arm(len(pr.conns))
	first := c0.pos // the connection carrying the first stripe
	n0 := pr.cut[first]
	var moved int64
	off := n0
	dispatched := 0
	// With several paths, the stripes on paths other than conn 0's are
	// followed until the peer's kernel acknowledged them, so that those
	// of a path that stops can be sent again on conn 0 (see failover.go).
	failover := pr.failover
	clear(pr.sstate)
dispatch:
	for _, w := range pr.sendW {
		c := pr.conns[w.pos]
		if w.pos == first || mask&(1<<c.path.idx) == 0 {
			continue
		}
		n := pr.cut[w.pos]
		select {
		case w.jobs <- job{c: pr.sview[w.pos], fp: *fp, total: total, off: off, buf: p[off : off+n]}:
			if failover && (c.path != c0.path || pr.leadOK) {
				// (On the lead's path, its other sockets' stripes:
				// their path stopping moves the lead, lead.go.)
				pr.sstate[w.pos] = stripeWriting
			}
			pr.soff[w.pos] = off
			dispatched++
			off += n
		case <-t.ctx.Done():
			break dispatch
		}
	}
	h0 := wire.FrameHeader{Type: wire.FrameData, Paths: mask, First: uint8(c0.path.idx), Len: n0, Total: total, Fingerprint: *fp}
	m, err := pr.leadWrite(ctx, &h0, p[:n0])
	moved += m
	d0 := time.Since(now)
	if err != nil {
		pr.send.interrupt()
	}
	c0.path.sent.Add(n0)
	// Per path: bytes sent and the longest of its connections' times.
	var pbytes [MaxPaths]uint64
	var ptime [MaxPaths]time.Duration
	pbytes[c0.path.idx], ptime[c0.path.idx] = n0, d0
	var retired uint16 // paths whose stripes go again on conn 0
	got := 0
	for got < dispatched {
		var r result
		if failover && err == nil {
			pr.stimer.Reset(max(t.stallAfter/4, time.Millisecond))
			select {
			case r = <-pr.sdone:
				pr.stimer.Stop()
			case <-pr.stimer.C:
				r, _, serr := pr.checkStalls(now, stripeWriting, retired)
				retired |= r
				if serr != nil {
					err = serr
					pr.send.interrupt()
				}
				continue
			}
		} else {
			r = <-pr.sdone
		}
		got++
		c := pr.conns[r.pos]
		moved += r.n
		i := c.path.idx
		pbytes[i] += uint64(r.n)
		ptime[i] = max(ptime[i], r.d)
		c.path.sent.Add(uint64(max(r.n-wire.FrameHeaderSize, 0)))
		if r.err != nil && pr.sstate[r.pos] != 0 && err == nil && !errors.Is(r.err, errProtocol) && t.callErr(ctx, pr, r.err) == nil {
			// The path failed under this stripe, or was retired
			// for stalling: the stripe goes again on conn 0.
			if retired&(1<<i) == 0 {
				if serr := pr.stopPath(c.path, "its connection failed", r.err); serr != nil {
					// The lead's path, and the lead did not move.
					err = r.err
					if serr != errNoMove {
						err = serr
					}
					pr.send.interrupt()
					continue
				}
				retired |= 1 << i
			}
			pr.sstate[r.pos] = stripeWritten
			continue
		}
		if r.err != nil && err == nil {
			err = r.err
			pr.send.interrupt()
		}
		if pr.sstate[r.pos] != 0 {
			pr.sstate[r.pos] = stripeWritten
		}
	}
	if err == nil && off != total {
		err = net.ErrClosed
	}
	if err == nil && failover {
		var r uint16
		r, err = pr.awaitAcks(ctx, now, retired)
		retired |= r
		if err == nil && retired != 0 && pr.leadOK {
			// The lead stalled too: it moves before the repairs
			// go on it.
			err = pr.leadStalled("send")
		}
		if err == nil && retired != 0 {
			var m int64
			m, err = pr.repair(ctx, fp, p, retired)
			moved += m
		}
	}
	if err == nil && pr.leadOK {
		err = pr.awaitLead(ctx)
	}
	if err != nil {
		return t.ioFailed(ctx, pr, err, moved > 0, "send")
	}
	if len(pr.paths) > 1 && !t.fixedWeights {
		// Re-estimate the paths' throughput: from the kernel's
		// counters, at most every sampleEvery, or else from how long
		// the writes took.
		end := time.Now()
		if end.Sub(pr.sampled) >= sampleEvery {
			pr.sampled = end
			for _, pa := range pr.paths {
				if !pa.sampleKernel(pr.sview) {
					pa.sample(pbytes[pa.idx], ptime[pa.idx])
				}
			}
		}
	}
	return nil
}

// eagerMax is the largest message TrySend writes on the caller's
// goroutine. Far below any socket buffer, and a schedule leaves at most a
// message or two unread per direction, so the write completes at once.
const eagerMax = 16 << 10

// TrySend sends messages of up to 16 KiB at once, as Send does, so that
// the caller need not hand them to another goroutine (transport.Eager);
// for larger ones it reports false without sending.
func (t *Transport) TrySend(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) (bool, error) {
	if len(p) > eagerMax {
		return false, nil
	}
	return true, t.send(ctx, peer, fp, p)
}

// Recv receives the next message from peer into p. The message must carry
// fingerprint *fp and be len(p) bytes long; otherwise Recv returns an
// *errs.MismatchError (see the package documentation for what becomes of
// the connection).
func (t *Transport) Recv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	pr, err := t.connected(ctx, peer)
	if err != nil {
		return err
	}
	if !pr.recv.enter(ctx) {
		return t.deadErr(ctx, pr)
	}
	c0 := pr.rl
	c0.rmu.Lock()
	pr.rentry = c0
	defer func() {
		// A move of the lead (lead.go) leaves the new lead locked too.
		c0.rmu.Unlock()
		if pr.rl != c0 {
			pr.rl.rmu.Unlock()
		}
		kept := pr.rkept != nil
		pr.recv.exit()
		if kept {
			// No message comes to take them if the pair failed: fail
			// drops them between receives, this after its receive
			// (checked with no receive in progress, so a fail landing
			// as this one ends is seen by one or the other).
			pr.recv.ifIdle(func() {
				if pr.failure.Load() != nil {
					pr.rkept = nil
				}
			})
		}
	}()

	// Small messages are latency-bound: poll for them. A large one is
	// worth the poller's wake-up, and polling would take the CPU from
	// the copies that move it.
	pr.rext = pr.rext[:0]
	pr.rpre = 0
	pr.rbig, pr.rstill = false, 0
	h, n, _, err := pr.leadHeader(ctx, len(p) <= eagerMax, fp, p)
	if err != nil {
		return t.ioFailed(ctx, pr, err, n > 0, "receive")
	}
	for err == nil && (h.Type == wire.FrameStripe || h.Type == wire.FrameRejoin) {
		if h.Type == wire.FrameRejoin {
			// A retired path dialed again (redial.go).
			err = pr.rejoinRecv(ctx, &h)
		} else {
			// A repair of a message already received whole: its
			// stripes came after all; the path it replaces is out
			// of use.
			err = pr.staleRepair(ctx, &h)
		}
		if err == nil {
			h, _, _, err = pr.leadHeader(ctx, false, fp, p)
		}
	}
	if err != nil {
		return t.ioFailed(ctx, pr, err, true, "receive")
	}
	if h.Type == wire.FrameAbort {
		return pr.fail(t.checkLost(peer, pr.rl.abortError(peer, &h)))
	}
	if h.Type != wire.FrameData {
		// A lead frame (wire.FrameLead) arrives only on another
		// connection than the lead stream it moves.
		return t.ioFailed(ctx, pr, fmt.Errorf("rank %d sent a %s frame where a message was due: %w", peer, h.Type, errProtocol), true, "receive")
	}
	want := uint64(len(p))
	if h.Total > want {
		// Reading it would need a buffer we do not have; the stream
		// cannot be kept in step.
		t.log.Warn("tcp: closing connections to a peer that sent a message longer than the receive",
			"peer", peer, "bytes", h.Total, "want", want, "fingerprint", h.Fingerprint.String())
		pr.fail(&errs.PeerError{Peer: peer, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
			"tcp: connection closed after rank %d sent a %d-byte message to a %d-byte receive", peer, h.Total, want)})
		return mismatch(peer, fp, &h.Fingerprint, h.Total, want)
	}
	buf := p[:h.Total]
	var parts []*conn
	inline := -1 // a stripe on the lead stream after the first (lead.go)
	if pr.rpre != 0 && (h.Len == h.Total || h.Fingerprint != *fp) {
		return t.ioFailed(ctx, pr, fmt.Errorf("rank %d sent a stripe of %v before a message %v that has none: %w", peer, *fp, h.Fingerprint, errProtocol), true, "receive")
	}
	if h.Len < h.Total || h.Paths != 0 {
		// The first stripe travelled on the lead of when it was
		// written (h.First): an old lead, for a header sent again by
		// a move, maybe one this rank never joined.
		first := pr.rl
		if h.Paths != 0 {
			fpath := pr.pathOf(int(h.First))
			if fpath == nil {
				return t.ioFailed(ctx, pr, fmt.Errorf("rank %d wrote the first stripe of a message on path %d, the pair uses %#x: %w",
					peer, h.First, pr.mask, errProtocol), true, "receive")
			}
			first = pr.conns[fpath.conns[0].pos]
		}
		if h.Len == h.Total {
			err = fmt.Errorf("rank %d sent a whole message naming other paths %#x: %w", peer, h.Paths, errProtocol)
		} else {
			parts, err = pr.stripedParts(h.Paths, first.pos)
			if err == nil && len(parts) == 0 {
				err = fmt.Errorf("rank %d sent %d bytes of a %d-byte message with no other stripes: %w", peer, h.Len, h.Total, errProtocol)
			}
			if err == nil && len(pr.rkept) > 0 {
				// Stripes read ahead of a lead frame while an
				// earlier message was due (lead.go).
				err = pr.useKept(&h, parts, buf)
			}
		}
		if err != nil {
			return t.ioFailed(ctx, pr, err, true, "receive")
		}
		if pr.rpre != 0 {
			// Stripes read before the header (lead.go).
			err = pr.checkPre(&h, parts)
			if err != nil {
				return t.ioFailed(ctx, pr, err, true, "receive")
			}
			k := 0
			for _, c := range parts {
				if pr.rpre&(1<<c.pos) == 0 {
					parts[k] = c
					k++
				}
			}
			parts = parts[:k]
		}
		for i, c := range parts {
			if c.pos == pr.rl.pos {
				// (Not one read before the header: that one came
				// before the lead frame.)
				inline = c.pos
				parts = append(parts[:i], parts[i+1:]...)
				break
			}
		}
		pr.recv.arm(len(pr.conns))
	}
	// The other stripes are read by their connections' workers, each
	// placed by the offset its frame carries. With several paths, the
	// sender may send a path's stripes again on conn 0 (a repair), so
	// conn 0 is watched while they come.
	watch := pr.multi && len(parts) > 0
	if watch {
		pr.rwait.Store(int32(len(parts)))
		defer pr.recv.restoreLead()
	}
	dispatched := 0
dispatch:
	for _, c := range parts {
		rc := pr.rview[c.pos]
		rc.rjob.Store(true) // no move of the lead onto it meanwhile (lead.go)
		select {
		case pr.recvW[c.pos].jobs <- job{c: rc, recv: true, watch: watch, fp: h.Fingerprint, total: h.Total, buf: buf}:
			dispatched++
		case <-t.ctx.Done():
			rc.rjob.Store(false)
			if watch {
				pr.rwait.Add(-int32(len(parts) - dispatched))
			}
			break dispatch
		}
	}
	moved := int64(n)
	if err == nil {
		var m int
		pr.rbody.Store(pr.leadOK) // (lead.go: a stripe ahead may be kept)
		m, err = pr.readWoken(ctx, buf[:h.Len])
		pr.rbody.Store(false)
		if err == nil {
			err = checkCRC(peer, &h, buf[:h.Len])
		}
		moved += int64(m)
		c0.path.received.Add(uint64(m))
		if err == nil && inline >= 0 {
			var m int64
			m, err = pr.inlineStripe(ctx, &h, buf)
			moved += m
		}
		if err != nil {
			pr.recv.interrupt()
		}
	}
	if len(parts) > 0 {
		var m int64
		m, err = pr.collectStripes(ctx, &h, buf, parts[:dispatched], watch, err)
		moved += m
		if err == nil && dispatched < len(parts) {
			err = net.ErrClosed
		}
	} else if err == nil && (inline >= 0 || pr.rpre != 0) {
		err = pr.checkCover(&h, 0)
	}
	if err != nil {
		return t.ioFailed(ctx, pr, err, true, "receive")
	}
	if h.Fingerprint != *fp || h.Total != want {
		return mismatch(peer, fp, &h.Fingerprint, h.Total, want)
	}
	return nil
}

func mismatch(peer int, local, remote *wire.Fingerprint, got, want uint64) error {
	e := &errs.MismatchError{Peer: peer, Local: *local, Remote: *remote}
	if got != want {
		e.Detail = fmt.Sprintf("%d bytes vs %d bytes", got, want)
	}
	return e
}

// Abort fails pending and later calls with an error wrapping
// errs.ErrAborted and cause, and tells the peers: before it returns, it
// writes an abort frame on every connection whose stream is at a frame
// boundary (waiting at most abortWriteTimeout for the kernel to take
// them), so that the news survives this process exiting at once; then, in
// the background, it keeps discarding what peers still send. If cause
// wraps an *errs.PeerError for a lost rank, the frames name that rank as
// the root cause.
func (t *Transport) Abort(cause error) {
	text := "aborted"
	if cause != nil {
		text = cause.Error()
	} else {
		cause = errors.New(text)
	}
	lost := -1
	var pe *errs.PeerError
	if errors.As(cause, &pe) && pe.Kind == errs.ErrPeerLost && pe.Peer >= 0 && pe.Peer < t.size {
		lost = pe.Peer
	}
	t.mu.Lock()
	if t.state.Load() != stateOpen {
		t.mu.Unlock()
		return
	}
	t.abortErr = fmt.Errorf("tcp: rank %d aborted: %w: %w", t.rank, cause, errs.ErrAborted)
	t.abortText = text
	t.abortFrame = wire.AppendLostAbortFrame(nil, text, lost)
	t.state.Store(stateAborted)
	t.mu.Unlock()
	t.cancel()
	var conns []*conn
	for _, pr := range t.peers {
		if pr == nil {
			continue
		}
		pr.send.kill()
		pr.recv.kill()
		pr.mu.Lock()
		for _, c := range pr.slots {
			if c != nil {
				conns = append(conns, c)
			}
		}
		conns = pr.genConns(conns)
		pr.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.writeAbort(t.abortFrame, abortWriteTimeout)
		}()
	}
	wg.Wait()
	for _, c := range conns {
		t.spawn(c.drain)
	}
}

// abortConn tells the peer at the other end of c, a connection that came
// up after the abort, about it and keeps discarding what it sends, in the
// background.
func (t *Transport) abortConn(c *conn) {
	t.spawn(func() {
		c.writeAbort(t.abortFrame, abortWriteTimeout)
		c.drain()
	})
}

// Close releases the listener, the connections and the goroutines, without
// waiting for peers. Calls in progress and later fail with an error wrapping
// errs.ErrClosed. What peers sent that was never read is discarded first,
// so the connections end with a FIN after the last message rather than a
// reset that would throw away its unsent tail.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.state.Load() == stateClosed {
		t.mu.Unlock()
		return nil
	}
	t.state.Store(stateClosed)
	pending := make([]net.Conn, 0, len(t.pending))
	for pc := range t.pending {
		pending = append(pending, pc.nc)
	}
	t.mu.Unlock()
	t.cancel()
	err := t.ln.Close()
	for _, c := range pending {
		c.Close()
	}
	for _, pr := range t.peers {
		if pr == nil {
			continue
		}
		pr.send.kill()
		pr.recv.kill()
		pr.closeConns()
	}
	t.wg.Wait()
	t.refusals.stop()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// spawn runs f in a goroutine that Close waits for. It reports false, and
// runs nothing, once the transport is closed.
func (t *Transport) spawn(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state.Load() == stateClosed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// stateErr returns the error for calls after Abort or Close, or nil.
func (t *Transport) stateErr() error {
	switch t.state.Load() {
	case stateAborted:
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.state.Load() == stateAborted {
			return t.abortErr
		}
		fallthrough
	case stateClosed:
		return fmt.Errorf("tcp: rank %d: %w", t.rank, errs.ErrClosed)
	}
	return nil
}

// lookup returns the peer for rank r after checking it.
func (t *Transport) lookup(r int) (*peer, error) {
	if r < 0 || r >= t.size || r == t.rank {
		return nil, fmt.Errorf("tcp: rank %d has no peer %d in a world of %d: %w", t.rank, r, t.size, errs.ErrInvalidArgument)
	}
	if r > t.rank && len(t.paths[r]) == 0 {
		return nil, fmt.Errorf("tcp: no address for rank %d: %w", r, errs.ErrInvalidArgument)
	}
	return t.peers[r], nil
}

// connected returns the peer for rank r once its connections are up,
// starting to dial it if this rank is the one to.
func (t *Transport) connected(ctx context.Context, r int) (*peer, error) {
	if err := t.stateErr(); err != nil {
		return nil, err
	}
	pr, err := t.lookup(r)
	if err != nil {
		return nil, err
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tcp: rank %d: %w", r, err)
	}
	select {
	case <-pr.ready:
		return pr, nil
	default:
	}
	if r > t.rank {
		if err := t.startDial(pr); err != nil {
			return nil, err
		}
	} else {
		t.startProbe(pr)
	}
	if t.onWaitConn != nil {
		t.onWaitConn(r)
	}
	select {
	case <-pr.ready:
		return pr, nil
	case <-pr.failed:
		return nil, pr.err()
	case <-t.ctx.Done():
		return nil, t.stateErr()
	case <-ctx.Done():
		return nil, fmt.Errorf("tcp: waiting for the connection to rank %d: %w", r, ctx.Err())
	}
}

// callErr returns the error for a call on pr that could not go on because
// of the transport's state, the peer's failure, or the end of ctx, in that
// order of precedence; nil if none of them applies. ioErr is the I/O error
// the call saw, if any.
func (t *Transport) callErr(ctx context.Context, pr *peer, ioErr error) error {
	if err := t.stateErr(); err != nil {
		return err
	}
	if err := pr.err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tcp: rank %d: %w", pr.rank, err)
	}
	if errors.Is(ioErr, os.ErrDeadlineExceeded) {
		// The socket deadline can pass a moment before the context
		// notices its own.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return fmt.Errorf("tcp: rank %d: %w", pr.rank, context.DeadlineExceeded)
		}
	}
	return nil
}

// deadErr returns the error for a call turned away by a dead gate.
func (t *Transport) deadErr(ctx context.Context, pr *peer) error {
	if err := t.callErr(ctx, pr, nil); err != nil {
		return err
	}
	return fmt.Errorf("tcp: rank %d: %w", t.rank, errs.ErrClosed) // not reached: gates die with a cause
}

// ioFailed returns the error for a call on pr whose I/O failed with ioErr.
// broken reports that the stream was left part way through a frame.
func (t *Transport) ioFailed(ctx context.Context, pr *peer, ioErr error, broken bool, what string) error {
	var perr *errs.PeerError
	switch {
	case errors.As(ioErr, &perr):
		// The peer aborted (told on a striped connection).
		return pr.fail(t.checkLost(pr.rank, perr))
	case errors.Is(ioErr, errProtocol):
		t.log.Warn("tcp: closing connections to a peer that broke the protocol", "peer", pr.rank, "err", ioErr)
		return pr.fail(&errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost, Cause: ioErr})
	}
	err := t.callErr(ctx, pr, ioErr)
	if err == nil {
		// Nothing of ours stopped the call: the connection failed.
		return pr.fail(&errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost,
			Cause: fmt.Errorf("tcp: connection lost during %s: %w", what, ioErr)})
	}
	if broken && t.state.Load() == stateOpen {
		pr.fail(&errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
			"tcp: connection closed after a %s was interrupted part way: %v", what, err)})
	}
	return err
}

// checkLost keeps a peer's abort that names a lost rank outside the
// communicator from being reported as that rank's loss: it becomes the
// peer's abort.
func (t *Transport) checkLost(peer int, err error) error {
	var pe *errs.PeerError
	if errors.As(err, &pe) && (pe.Peer < 0 || pe.Peer >= t.size) {
		return &errs.PeerError{Peer: peer, Kind: errs.ErrAborted, Cause: pe.Cause}
	}
	return err
}

// err returns the peer's failure, or nil.
func (pr *peer) err() error {
	if e := pr.failure.Load(); e != nil {
		return *e
	}
	return nil
}

// fail records err as the peer's failure unless one is already recorded,
// interrupts the calls on the peer and closes its connections. It returns
// the recorded failure.
func (pr *peer) fail(err error) error {
	if !pr.failure.CompareAndSwap(nil, &err) {
		return pr.err()
	}
	close(pr.failed)
	pr.send.kill()
	pr.recv.kill()
	// The stripes kept for a later message (lead.go) go: between
	// receives here, or as the receive in progress ends (Recv).
	pr.recv.ifIdle(func() { pr.rkept = nil })
	pr.closeConns()
	return err
}

// closeConns closes the peer's connections; connections that come up later
// are closed at once.
func (pr *peer) closeConns() {
	pr.recv.closeWait()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.closed = true
	for _, c := range pr.slots {
		if c != nil {
			discardQueued(c.nc)
			c.nc.Close()
		}
	}
	for _, c := range pr.genConns(nil) {
		discardQueued(c.nc)
		c.nc.Close()
	}
}

// interrupt makes the I/O in progress through g fail at once; the call then
// reports the failure that caused it.
func (g *gate) interrupt() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.setAll(aLongTimeAgo)
}
