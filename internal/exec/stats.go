package exec

import (
	"time"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// FirstRecv returns when the last Run's first message from a peer arrived,
// and false if that Run was not Timed or received nothing.
func (e *Executor) FirstRecv() (time.Time, bool) {
	if e.first == 0 {
		return time.Time{}, false
	}
	return e.base.Add(time.Duration(e.first - 1)), true
}

// Chunks returns the number of messages this rank's program moves with
// elements of es bytes: every chunk it sends or receives, each counted
// once (a forwarded chunk is one received and one sent).
func (e *Executor) Chunks(prog *sched.Program, es int) int {
	n := 0
	for si := range prog.Steps {
		for i := range prog.Steps[si].Ops {
			op := &prog.Steps[si].Ops[i]
			switch op.Kind {
			case sched.Send:
				n += e.chunks(op.Src.Len * es)
			case sched.Recv, sched.RecvReduce:
				n += e.chunks(op.Dst.Len * es)
			case sched.RecvCopySend, sched.RecvReduceSend:
				n += 2 * e.chunks(op.Dst.Len*es)
			}
		}
	}
	return n
}
