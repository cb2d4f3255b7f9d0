package tcp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// MaxPaths is the most listener addresses (network paths) a rank may
// publish.
const MaxPaths = 16

// pathProbeTimeout bounds the connection attempt that finds whether a path
// reaches its peer.
const pathProbeTimeout = 3 * time.Second

// defaultRate is a path's starting throughput estimate, in bytes/s, when
// its link speed is unknown (1 Gbit/s; only ratios between paths matter).
const defaultRate = 125e6

// Weighting. A path's share of a striped message follows its estimated
// throughput; the estimate is an exponentially weighted moving average
// of the throughput each striped send measures on it.
const (
	// rateAlpha is the weight of a new sample.
	rateAlpha = 0.3
	// sampleEvery is how often a busy pair samples its paths' kernel
	// counters.
	sampleEvery = 20 * time.Millisecond
	// rateGrowth bounds how much one sample may raise the estimate: a
	// write that the socket buffer absorbs at once says little about the
	// link.
	rateGrowth = 2
	// minSample is the fewest bytes a send must put on a path for its
	// time to count as a sample.
	minSample = 64 << 10
	// minShare is the smallest share of a message a path is given; a path
	// whose weight is below it carries nothing but is tried again, with
	// minShare, every probeEvery (so a link that recovers rejoins).
	minShare = 1.0 / 32
	// reprobeEvery is how often a path left out for its low weight is
	// given a stripe again.
	reprobeEvery = time.Second
	// evenBand is how far apart the estimates of the paths in use may be
	// and still be split evenly: on links of one speed the estimates
	// wander by some percent from sample to sample, and a message cut to
	// them waits for the path given too much (on 2 × 2 namespaces with
	// two equal links, 0.26–0.32 GB/s busbw measured against 0.33 even).
	evenBand = 1.2
)

// splitAddrs splits a comma-separated list of listener addresses.
func splitAddrs(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// A path is one network route between a pair of ranks: one listener
// address of the higher rank, reached over whichever local interface the
// routing table picks, carrying NSocks connections.
type path struct {
	idx    int    // index among the listener's addresses
	remote string // the listener address
	local  string // this end's address, once connected
	conns  []*conn

	sent, received atomic.Uint64
	rate           atomic.Uint64 // float64 bits: estimated bytes/s
	share          atomic.Uint64 // float64 bits: share of the last striped send
	lastUsed       time.Time     // last striped send it carried (sender only)
	retired        atomic.Bool   // stopped (see failover.go): carries nothing more
	absent         atomic.Bool   // never connected (see redial.go): retired until dialed
	redialing      bool          // being dialed again (redial.go; under the peer's mu)
	redials        int           // times it was dialed again (under the peer's mu)
	// lost is the newest generation whose dialing failed here after a
	// connection of it reached the listener (redial.go): the listener may
	// hold it complete, and it is not dialed again. Under the peer's mu.
	lost uint8
	// toldAt is the send lead's stream offset after the rejoin frame that
	// announced the generation this rank sends on (redial.go): until the
	// peer's host acknowledged that far, the peer may not read that
	// generation, and the lead does not move onto it (lead.go). Under
	// the peer's smu.
	toldAt uint64

	// The kernel's counters at the last sample (sender only): bytes
	// acknowledged, and the longest busy time of the path's connections.
	acked    uint64
	busy     time.Duration
	counters bool // acked and busy hold a first reading
}

// sampleKernel folds the throughput the kernel measured on the path since
// the last call into its estimate: bytes acknowledged per unit of time
// the connections were busy sending, so idle time does not count. It
// reports false where the kernel's counters cannot be read. view holds
// the connections the sender uses, by position.
func (p *path) sampleKernel(view []*conn) bool {
	var acked uint64
	var busy time.Duration
	for _, c := range p.conns {
		a, b, ok := tcpProgress(view[c.pos])
		if !ok {
			return false
		}
		acked += a
		busy = max(busy, b)
	}
	if p.counters && acked >= p.acked+minSample && busy > p.busy {
		p.sample(acked-p.acked, busy-p.busy)
	}
	if !p.counters || acked >= p.acked+minSample {
		p.acked, p.busy, p.counters = acked, busy, true
	}
	return true
}

func (p *path) getRate() float64   { return math.Float64frombits(p.rate.Load()) }
func (p *path) setRate(r float64)  { p.rate.Store(math.Float64bits(r)) }
func (p *path) setShare(s float64) { p.share.Store(math.Float64bits(s)) }

// sample folds a measured throughput into the path's estimate.
func (p *path) sample(bytes uint64, d time.Duration) {
	if bytes < minSample || d <= 0 {
		return
	}
	old := p.getRate()
	s := min(float64(bytes)/d.Seconds(), rateGrowth*old)
	p.setRate((1-rateAlpha)*old + rateAlpha*s)
}

// PathStats describes one network path between this rank and a peer.
type PathStats struct {
	Peer int
	// Path is the index of the path's listener address among those the
	// higher rank of the pair published.
	Path          int
	Local, Remote string
	// Up is false for a path dropped because it could not connect.
	Up bool
	// Retired is true for a path that stopped while in use (see
	// Config.StallAfter): its stripes went again on path 0 and it
	// carries nothing until it is dialed again.
	Retired bool
	// Gen counts the times this rank's sends moved to connections of
	// the path dialed again after it was retired.
	Gen int
	// Rate is the estimated throughput in bytes/s, from the link speed at
	// first and from measured sends afterwards; Share is the fraction of
	// the last striped message this rank sent on the path.
	Rate, Share float64
	// Sent and Received count payload bytes.
	Sent, Received uint64
	// RTT and Retrans are the kernel's smoothed round-trip time and
	// retransmitted segments (TCP_INFO, summed over the path's
	// connections; zero where unavailable).
	RTT     time.Duration
	Retrans uint32
}

// String formats s on one line.
func (s PathStats) String() string {
	state := "up"
	switch {
	case !s.Up:
		state = "dropped"
	case s.Retired:
		state = "retired"
	}
	return fmt.Sprintf("peer %d path %d %s->%s %s rate %.1f MB/s share %.2f sent %d received %d rtt %v retrans %d",
		s.Peer, s.Path, s.Local, s.Remote, state, s.Rate/1e6, s.Share, s.Sent, s.Received, s.RTT, s.Retrans)
}

// Paths returns the state of every path to every connected peer, by peer
// and path. It is safe to call at any time.
func (t *Transport) Paths() []PathStats {
	var out []PathStats
	for _, pr := range t.peers {
		if pr == nil {
			continue
		}
		select {
		case <-pr.ready:
		default:
			continue
		}
		pr.mu.Lock()
		for _, p := range pr.paths {
			s := PathStats{Peer: pr.rank, Path: p.idx, Local: p.local, Remote: p.remote, Up: !p.absent.Load(), Retired: p.retired.Load(),
				Rate: p.getRate(), Share: math.Float64frombits(p.share.Load()),
				Sent: p.sent.Load(), Received: p.received.Load(), Gen: int(pr.sgen[p.idx])}
			for _, c := range p.conns {
				if rtt, re, ok := tcpInfo(pr.sview[c.pos]); ok {
					s.RTT = max(s.RTT, rtt)
					s.Retrans += re
				}
			}
			out = append(out, s)
		}
		pr.mu.Unlock()
	}
	return out
}

// plan cuts a striped message of total bytes over pr's paths in
// proportion to their estimated throughput, filling pr.cut (bytes per
// connection, in connection order) and returning the set of paths other
// than conn 0's own stripe that carry something (wire.FrameHeader.Paths).
// Connection 0 always carries the first stripe, possibly empty. The
// caller holds the send gate.
func (pr *peer) plan(total uint64, now time.Time) uint16 {
	var sum float64
	for _, p := range pr.paths {
		if !p.retired.Load() {
			sum += p.getRate()
		}
	}
	var mask uint16
	var use float64
	lead := pr.paths[0]
	if pr.sl != nil {
		lead = pr.sl.path
	}
	lo, hi := math.Inf(1), 0.0
	for _, p := range pr.paths {
		r := p.getRate()
		pr.pshare[p.idx] = 0
		if p.retired.Load() || r/sum < minShare && now.Sub(p.lastUsed) < reprobeEvery {
			continue
		}
		use += max(r, minShare*sum)
		pr.pshare[p.idx] = max(r, minShare*sum)
		lo, hi = min(lo, pr.pshare[p.idx]), max(hi, pr.pshare[p.idx])
	}
	if hi <= evenBand*lo {
		// Estimates this close are one speed seen through noise: an even
		// split (evenBand).
		use = 0
		for _, p := range pr.paths {
			if pr.pshare[p.idx] != 0 {
				pr.pshare[p.idx] = 1
				use++
			}
		}
	}
	left := total
	var last int = -1
	for _, p := range pr.paths {
		w := pr.pshare[p.idx]
		p.setShare(w / use)
		if w == 0 {
			for _, c := range p.conns {
				pr.cut[c.pos] = 0
			}
			continue
		}
		p.lastUsed = now
		mask |= 1 << p.idx
		n := uint64(float64(total) * w / use)
		per := n / uint64(len(p.conns))
		for _, c := range p.conns {
			pr.cut[c.pos] = per
			left -= per
			last = c.pos
		}
	}
	if last >= 0 {
		pr.cut[last] += left // rounding
	}
	if mask == 1<<lead.idx && len(lead.conns) == 1 {
		// All of it on conn 0: not striped.
		return 0
	}
	return mask
}

// stripedParts returns the connections other than first's (the one that
// carried the first stripe) that carry the stripes of a message whose
// first stripe named paths mask, in the order
// their stripes follow one another, or an error if mask names a path the
// pair does not use.
func (pr *peer) stripedParts(mask uint16, first int) ([]*conn, error) {
	if mask&^pr.mask != 0 {
		return nil, fmt.Errorf("rank %d striped a message over paths %#x, the pair uses %#x: %w", pr.rank, mask, pr.mask, errProtocol)
	}
	if mask&pr.rgone != 0 {
		return nil, fmt.Errorf("rank %d striped a message over paths %#x, after retiring %#x: %w", pr.rank, mask, pr.rgone, errProtocol)
	}
	parts := pr.rparts[:0]
	for _, c := range pr.conns {
		if c.pos != first && mask&(1<<c.path.idx) != 0 {
			parts = append(parts, c)
		}
	}
	pr.rparts = parts
	return parts, nil
}

// findPaths finds which of a peer's listener addresses this rank reaches:
// it connects to each at once (and closes at once, which the listener
// ignores), trying again with backoff while none answers. Once one has
// answered, the others are given pathGrace (see probePaths) rather than
// pathProbeTimeout: a path that has not answered by then is dropped, with
// a log line, so an unreachable extra address does not hold up every
// pair that connects. It returns the set of reachable paths.
func (t *Transport) findPaths(ctx context.Context, pr *peer, addrs []string) (uint16, error) {
	backoff := minBackoff
	refusals := 0
	for {
		errsAt := probePaths(ctx, addrs)
		var mask uint16
		refused := 0
		for i, err := range errsAt {
			if err == nil {
				mask |= 1 << i
			} else if errors.Is(err, syscall.ECONNREFUSED) {
				refused++
			}
		}
		if mask != 0 {
			for i, err := range errsAt {
				if err != nil {
					pr.dropPath(i, addrs[i], "path does not reach the peer; dropped", err)
					pr.mu.Lock()
					pr.reprobe |= 1 << i
					pr.mu.Unlock()
				}
			}
			return mask, nil
		}
		if refused == len(addrs) {
			if refusals++; refusals >= goneAfterRefusals {
				return 0, &errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
					"tcp: rank %d's listeners at %s refuse connections: the process is gone", pr.rank, strings.Join(addrs, ","))}
			}
		} else {
			refusals = 0
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, &errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
				"tcp: no path to rank %d at %s within %v (errors: %v): %w", pr.rank, strings.Join(addrs, ","), t.connectTimeout, errsAt, errs.ErrTimeout)}
		case <-timer.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// pathGrace is how long the other paths of a pair are waited for once one
// has answered (or pathGraceTimes the time that one took, if longer).
// Paths of one pair are alike in latency; a path that takes this much
// longer than another to accept a connection does not reach the peer (an
// address it cannot route to, or a link that drops its packets), and
// waiting for pathProbeTimeout would cost every pair that long. (The
// grace is shorter than Linux's first SYN retransmission, 1 s: a path
// whose first connection request is lost is dropped for the job.)
const (
	pathGrace      = 250 * time.Millisecond
	pathGraceTimes = 4
	// pathSettle is a second, short wait after pathGrace, so that the
	// answers of connections that completed while this process waited
	// for a CPU are taken before any path is given up.
	pathSettle = 20 * time.Millisecond
)

// errNoAnswer is why a path that did not answer within the grace after
// another one did is dropped.
var errNoAnswer = errors.New("no answer within the grace after another path answered")

// probePaths connects to every address at once and returns, by address,
// why it could not connect (nil if it could). Each attempt is bounded by
// pathProbeTimeout; once one address answered, the others are given
// pathGrace (or pathGraceTimes as long as that one took), and those still
// pending then fail with errNoAnswer. It returns once every attempt
// ended.
func probePaths(ctx context.Context, addrs []string) []error {
	pctx, cancel := context.WithTimeout(ctx, pathProbeTimeout)
	type answer struct {
		i   int
		err error
	}
	answers := make(chan answer, len(addrs))
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // no attempt outlives the call
	}()
	start := time.Now()
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			nc, err := d.DialContext(pctx, "tcp", a)
			if err == nil {
				nc.Close()
			}
			answers <- answer{i, err}
		}()
	}
	errsAt := make([]error, len(addrs))
	pending := make([]bool, len(addrs))
	for i := range pending {
		pending[i] = true
	}
	var grace *time.Timer
	var graceC <-chan time.Time
	settled := false
	for left := len(addrs); left > 0; {
		select {
		case a := <-answers:
			left--
			if a.err != nil && grace != nil && errors.Is(a.err, context.DeadlineExceeded) {
				// The probe's own bound ran out first (the answer that
				// started the grace came late): it did not answer either.
				a.err = errNoAnswer
			}
			errsAt[a.i], pending[a.i] = a.err, false
			if a.err == nil && grace == nil {
				grace = time.NewTimer(max(pathGrace, pathGraceTimes*time.Since(start)))
				defer grace.Stop()
				graceC = grace.C
			}
			continue
		case <-graceC:
		}
		if !settled {
			settled = true
			grace.Reset(pathSettle)
			continue
		}
		for i, p := range pending {
			if p {
				errsAt[i] = errNoAnswer
			}
		}
		return errsAt
	}
	return errsAt
}

// maskPaths counts the paths in a mask.
func maskPaths(m uint16) int { return bits.OnesCount16(m) }
