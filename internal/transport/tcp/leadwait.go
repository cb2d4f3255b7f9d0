package tcp

import (
	"os"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// watchRepairs is the receive's watch of the lead c0 for repairs while the
// stripes of a message come (collectStripes): it returns the next frame
// header on c0, or an error. stripesDue says workers still have stripes
// to answer for; the last of them wakes the watch (worker.run), and the
// watch then returns os.ErrDeadlineExceeded, as a read of c0 woken by a
// past deadline does (peer.woken tells a wake-up from a failure).
//
// Reading c0 to wait would make each such wake-up cost an allocation
// (net wraps the deadline error in a new *net.OpError), so while stripes
// are due and c0 holds nothing already read, the watch first waits for c0
// to have bytes in the receive gate's waitLead, whose wake-up allocates
// nothing, and reads only then. pr.rinwait tells the worker which wake
// the watch needs: set before the watch looks at rwait and cleared before
// it looks again and reads, so a worker that brings rwait to 0 either
// sees it set (and wakes only the wait), or the watch sees rwait at 0 (and
// does not read).
func (pr *peer) watchRepairs(c0 *conn, stripesDue bool) (wire.FrameHeader, error) {
	if stripesDue && c0.quiet() {
		pr.rinwait.Store(true)
		ok, err := true, error(nil)
		if pr.rwait.Load() != 0 {
			ok, err = pr.recv.waitLead(c0)
		}
		pr.rinwait.Store(false)
		if ok && err != nil || pr.rwait.Load() == 0 {
			return wire.FrameHeader{}, os.ErrDeadlineExceeded
		}
	}
	return c0.watchHeader(pr.rank)
}
