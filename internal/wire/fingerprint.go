// Package wire defines what travels between ranks besides user data: the
// fingerprint every message of a collective carries, and (for the network
// transports) frame headers and the handshake.
package wire

import (
	"fmt"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// CollSendRecv marks point-to-point traffic in Fingerprint.Coll.
const CollSendRecv = sched.SendRecv

// Fingerprint identifies one collective call as its caller issued it. Every
// message of the call carries it, and a receiver whose own fingerprint
// differs fails with a mismatch error that shows both.
type Fingerprint struct {
	Seq   uint64     // per-communicator sequence number of the call (p2p: per peer pair and direction)
	Coll  sched.Coll // the collective, or CollSendRecv
	DType reduce.DType
	Op    reduce.Op // reduction operator; 0 when the collective does not reduce
	Root  int32     // root rank, or the user's tag for Send/Recv; 0 when unused
	Count int64     // elements per rank as the caller gave them (V variants: a digest of the counts)
}

func (f Fingerprint) String() string {
	name := f.Coll.String()
	if f.Coll == CollSendRecv {
		return fmt.Sprintf("Send/Recv(%s, %d, tag %d) as p2p #%d", f.DType, f.Count, f.Root, f.Seq)
	}
	s := fmt.Sprintf("%s(%s, %d", name, f.DType, f.Count)
	if f.Op != 0 {
		s += ", " + f.Op.String()
	}
	if f.Coll.Rooted() {
		s += fmt.Sprintf(", root %d", f.Root)
	}
	return s + fmt.Sprintf(") as op #%d", f.Seq)
}
