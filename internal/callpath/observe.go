package callpath

import (
	"context"
	rtrace "runtime/trace"
	"time"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/zcopy"
)

// Op describes one observed collective: the fields of the root's OpEvent.
type Op struct {
	Seq      uint64
	Name     string
	DType    reduce.DType
	Bytes    int
	Algo     string
	Chunks   int
	Start    time.Time
	Duration time.Duration
	Wait     time.Duration
	Err      error
}

// observe starts a call's observation: Start and, when the program runs
// under `go tool trace`, a runtime/trace region, which it returns. p.Mu
// is held. Start of a zero-copy candidate (zc) waits until the ranks have
// chosen its path (runZeroCopy).
func (p *Path) observe(ctx context.Context, k *Call, prog *sched.Program, start time.Time, zc bool) *rtrace.Region {
	if p.Start != nil {
		p.op = Op{Seq: p.Seq, Name: k.Name, DType: k.DT, Bytes: max(len(k.In), len(k.Out)), Algo: GroupAlgo, Chunks: 1, Start: start}
		if prog != nil { // nil: a group call (group.go), which moves one slot
			p.op.Algo, p.op.Chunks = prog.Algo, p.Ex.Chunks(prog, k.DT.Size())
		}
		if !zc {
			p.Start(&p.op)
		}
	}
	var r *rtrace.Region
	if rtrace.IsEnabled() {
		r = rtrace.StartRegion(ctx, "hcomm/"+k.Name)
	}
	return r
}

// observeEnd ends what observe started.
func (p *Path) observeEnd(r *rtrace.Region, err error) {
	if r != nil {
		r.End()
	}
	if p.End != nil {
		e := &p.op
		e.Duration, e.Err = p.Clock.Now().Sub(e.Start), err
		if e.Algo == GroupAlgo {
			e.Wait = e.Duration
		} else if e.Algo == zcopy.Algo {
			e.Wait = max(p.zcPath.Met.Sub(e.Start), 0)
		} else if t, ok := p.Ex.FirstRecv(); ok {
			e.Wait = max(t.Sub(e.Start), 0)
		}
		p.End(e)
	}
}
