package sched

import (
	"container/heap"
	"fmt"
)

// Rates prices the work of a schedule in the α–β–γ model, extended by a
// term for local copies: a message costs Alpha plus Beta per element it
// carries, a reduction Gamma per element it reduces, a Copy op Delta per
// element.
type Rates struct {
	Alpha, Beta, Gamma, Delta float64
}

// CriticalPath returns the time the programs of all ranks of one call take
// together (the finishing time of the last rank) under rates r, in the
// one-port, full-duplex model the textbook cost formulas assume:
//
//   - a rank's steps run in order, a step ending when all its ops have;
//   - a step first runs its local ops (Copy, LocalReduce) one after the
//     other, as the executor does, and only then its messages;
//   - a message starts once its sender has reached the sending op's step
//     (for a forwarding op: once that op's receive and reduction are done)
//     and its receiver the receiving op's step (rendezvous), and once the
//     sender is sending nothing else and the receiver receiving nothing
//     else; it then takes Alpha + Beta·length;
//   - a receive that reduces takes Gamma·length more after its message;
//   - forwarded data is sent once fully received: the pipelining the
//     executor does inside forwarding ops is not modelled.
//
// Messages competing for a rank are served earliest-ready first, ties going
// to the one whose op comes first in its sender's step, then to the lower
// sender and receiver. With Alpha alone the result counts the
// messages on the critical path; with Beta alone the elements moved along
// it; with Gamma alone the elements reduced along it; with Delta alone the
// elements copied along it. The programs must be
// a valid schedule (Verify); CriticalPath reports an error if messages do
// not match or the ranks cannot all finish.
func CriticalPath(progs []*Program, r Rates) (float64, error) {
	cp := cpSim{rates: r, ranks: make([]cpRank, len(progs))}
	return cp.run(progs)
}

// Hosts places the ranks of a call on hosts for CriticalPathHosts: Host[r]
// is rank r's host (0 ≤ Host[r] < len of the hosts), Inter the α and β of
// a message between hosts.
type Hosts struct {
	Host  []int
	Inter Rates
}

// CriticalPathHosts is CriticalPath with each message priced by the link
// it takes: a message between ranks of one host costs r.Alpha +
// r.Beta·length, one between hosts h.Inter.Alpha + h.Inter.Beta·length,
// and the messages leaving one host take turns on its link (the host's
// NIC, and the host's network stack: a message's α is per-message work
// there too), as a rank's messages take turns on its port. Gamma and
// Delta are r's.
func CriticalPathHosts(progs []*Program, r Rates, h Hosts) (float64, error) {
	if len(h.Host) != len(progs) {
		return 0, fmt.Errorf("sched: critical path: %d hosts for %d ranks", len(h.Host), len(progs))
	}
	hosts := 0
	for rank, x := range h.Host {
		if x < 0 || x >= len(progs) {
			return 0, fmt.Errorf("sched: critical path: rank %d on host %d", rank, x)
		}
		hosts = max(hosts, x+1)
	}
	cp := cpSim{rates: r, ranks: make([]cpRank, len(progs)), host: h.Host, inter: h.Inter, nicFree: make([]float64, hosts)}
	return cp.run(progs)
}

// cpSim is the state of one CriticalPath call.
type cpSim struct {
	rates Rates
	ranks []cpRank
	msgs  []cpMsg
	queue cpQueue
	seq   int
	done  float64

	host    []int // for CriticalPathHosts: each rank's host
	inter   Rates
	nicFree []float64 // when each host's link is next free
}

// crosses reports whether m goes between hosts.
func (cp *cpSim) crosses(m *cpMsg) bool {
	return cp.host != nil && cp.host[m.from] != cp.host[m.to]
}

type cpRank struct {
	prog     *Program
	step     int     // current step, len(Steps) once finished
	start    float64 // when the current step's messages may start (after its local ops)
	pending  int     // ops of the current step not yet complete
	end      float64 // latest completion among the current step's ops
	sendFree float64 // when the rank's sending side is next free
	recvFree float64 // when its receiving side is next free
}

// cpMsg is one message; ready times are negative until known.
type cpMsg struct {
	from, to  int
	fromStep  int
	fromOp    int
	toStep    int
	toOp      int
	length    int
	sendReady float64
	recvReady float64
	queued    bool
}

func (cp *cpSim) run(progs []*Program) (float64, error) {
	n := len(progs)
	// Match the k-th send from a to b with the k-th receive at b from a.
	type pair struct{ a, b int }
	sends := map[pair][]int{}
	var recvs []struct {
		p          pair
		step, op   int
		length, at int
	}
	for a, p := range progs {
		if p == nil {
			return 0, fmt.Errorf("sched: critical path: rank %d has no program", a)
		}
		cp.ranks[a].prog = p
		for si, st := range p.Steps {
			for oi, op := range st.Ops {
				if to, ok := op.Sends(); ok {
					if to < 0 || to >= n {
						return 0, fmt.Errorf("sched: critical path: rank %d sends to %d of %d", a, to, n)
					}
					k := pair{a, to}
					sends[k] = append(sends[k], len(cp.msgs))
					cp.msgs = append(cp.msgs, cpMsg{from: a, to: to, fromStep: si, fromOp: oi,
						length: op.Len(), sendReady: -1, recvReady: -1, toStep: -1})
				}
				if from, ok := op.Receives(); ok {
					recvs = append(recvs, struct {
						p          pair
						step, op   int
						length, at int
					}{pair{from, a}, si, oi, op.Dst.Len, 0})
				}
			}
		}
	}
	next := map[pair]int{}
	for _, rv := range recvs {
		list := sends[rv.p]
		k := next[rv.p]
		if k >= len(list) {
			return 0, fmt.Errorf("sched: critical path: rank %d receives more messages from %d than it sends", rv.p.b, rv.p.a)
		}
		next[rv.p] = k + 1
		m := &cp.msgs[list[k]]
		m.toStep, m.toOp = rv.step, rv.op
	}
	for _, m := range cp.msgs {
		if m.toStep < 0 {
			return 0, fmt.Errorf("sched: critical path: a message from %d to %d is never received", m.from, m.to)
		}
	}
	// Index each step's messages by op.
	stepMsgs := make([][][2][]int, n) // [rank][step] -> per op send/recv message
	for r, p := range progs {
		stepMsgs[r] = make([][2][]int, len(p.Steps))
		for si, st := range p.Steps {
			s, v := make([]int, len(st.Ops)), make([]int, len(st.Ops))
			for i := range s {
				s[i], v[i] = -1, -1
			}
			stepMsgs[r][si] = [2][]int{s, v}
		}
	}
	for i, m := range cp.msgs {
		stepMsgs[m.from][m.fromStep][0][m.fromOp] = i
		stepMsgs[m.to][m.toStep][1][m.toOp] = i
	}
	for r := range cp.ranks {
		cp.begin(r, 0, stepMsgs)
	}
	for cp.queue.Len() > 0 {
		it := heap.Pop(&cp.queue).(cpItem)
		m := &cp.msgs[it.msg]
		at := cp.earliest(m)
		if at > it.at {
			it.at = at
			heap.Push(&cp.queue, it)
			continue
		}
		end := at + cp.rates.Alpha + cp.rates.Beta*float64(m.length)
		if cp.crosses(m) {
			end = at + cp.inter.Alpha + cp.inter.Beta*float64(m.length)
			cp.nicFree[cp.host[m.from]] = end
		}
		cp.ranks[m.from].sendFree, cp.ranks[m.to].recvFree = end, end
		// The sender's op is complete.
		cp.complete(m.from, end, stepMsgs)
		// The receiver's op: reduce, then complete or forward.
		rk := &cp.ranks[m.to]
		op := rk.prog.Steps[m.toStep].Ops[m.toOp]
		t := end
		if op.Kind == RecvReduce || op.Kind == RecvReduceSend {
			t += cp.rates.Gamma * float64(op.Dst.Len)
		}
		if op.Kind == RecvReduceSend || op.Kind == RecvCopySend {
			fw := stepMsgs[m.to][m.toStep][0][m.toOp]
			cp.msgs[fw].sendReady = t
			cp.enqueue(fw)
			continue
		}
		cp.complete(m.to, t, stepMsgs)
	}
	for r, rk := range cp.ranks {
		if rk.step < len(rk.prog.Steps) {
			return 0, fmt.Errorf("sched: critical path: rank %d cannot finish step %d", r, rk.step)
		}
	}
	return cp.done, nil
}

// begin starts step si of rank r at the time the previous one ended.
func (cp *cpSim) begin(r, si int, stepMsgs [][][2][]int) {
	rk := &cp.ranks[r]
	for ; si < len(rk.prog.Steps); si++ {
		rk.step, rk.pending = si, 0
		ops := rk.prog.Steps[si].Ops
		for _, op := range ops {
			switch op.Kind {
			case Copy:
				rk.end += cp.rates.Delta * float64(op.Dst.Len)
			case LocalReduce:
				rk.end += cp.rates.Gamma * float64(op.Dst.Len)
			}
		}
		rk.start = rk.end
		for oi, op := range ops {
			if op.Kind == Copy || op.Kind == LocalReduce {
				continue
			}
			rk.pending++
			if mi := stepMsgs[r][si][1][oi]; mi >= 0 {
				cp.msgs[mi].recvReady = rk.start
				cp.enqueue(mi)
			}
			if mi := stepMsgs[r][si][0][oi]; mi >= 0 && op.Kind == Send {
				cp.msgs[mi].sendReady = rk.start
				cp.enqueue(mi)
			}
		}
		if rk.pending > 0 {
			return
		}
	}
	rk.step = len(rk.prog.Steps)
	cp.done = max(cp.done, rk.end)
}

// complete records that one op of rank r's current step finished at t.
func (cp *cpSim) complete(r int, t float64, stepMsgs [][][2][]int) {
	rk := &cp.ranks[r]
	rk.end = max(rk.end, t)
	rk.pending--
	if rk.pending == 0 {
		cp.begin(r, rk.step+1, stepMsgs)
	}
}

// earliest returns when message m can start, both ends being ready.
func (cp *cpSim) earliest(m *cpMsg) float64 {
	t := max(m.sendReady, m.recvReady, cp.ranks[m.from].sendFree, cp.ranks[m.to].recvFree)
	if cp.crosses(m) {
		t = max(t, cp.nicFree[cp.host[m.from]])
	}
	return t
}

// enqueue queues message i once both of its ends are ready.
func (cp *cpSim) enqueue(i int) {
	m := &cp.msgs[i]
	if m.queued || m.sendReady < 0 || m.recvReady < 0 {
		return
	}
	m.queued = true
	cp.seq++
	heap.Push(&cp.queue, cpItem{at: cp.earliest(m), op: m.fromOp, from: m.from, to: m.to, seq: cp.seq, msg: i})
}

type cpItem struct {
	at                float64
	op, from, to, seq int
	msg               int
}

type cpQueue []cpItem

func (q cpQueue) Len() int { return len(q) }
func (q cpQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.op != b.op {
		return a.op < b.op
	}
	if a.from != b.from {
		return a.from < b.from
	}
	if a.to != b.to {
		return a.to < b.to
	}
	return a.seq < b.seq
}
func (q cpQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *cpQueue) Push(x any)   { *q = append(*q, x.(cpItem)) }
func (q *cpQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
