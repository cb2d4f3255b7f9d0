package sched

import (
	"errors"
	"fmt"
	"strings"
)

// Coll is a collective operation.
type Coll uint8

const (
	AllReduce Coll = iota + 1
	Reduce
	Broadcast
	AllGather
	ReduceScatter
	AllToAll
	Gather
	Scatter
	Barrier

	// SendRecv is point-to-point traffic (Send and Recv), which has no
	// schedule; it names such calls in fingerprints and the user's API.
	SendRecv Coll = 100
)

var collNames = [...]string{AllReduce: "AllReduce", Reduce: "Reduce", Broadcast: "Broadcast",
	AllGather: "AllGather", ReduceScatter: "ReduceScatter", AllToAll: "AllToAll",
	Gather: "Gather", Scatter: "Scatter", Barrier: "Barrier"}

func (c Coll) String() string {
	if c == SendRecv {
		return "SendRecv"
	}
	if int(c) < len(collNames) && collNames[c] != "" {
		return collNames[c]
	}
	return fmt.Sprintf("coll(%d)", uint8(c))
}

// CollNamed returns the collective (AllReduce through Barrier) whose
// String is name, ignoring case; "bcast" is Broadcast too. It is the one
// name → collective lookup (ExplainPlan, HCOMM_ALGO, hcomm sim and plan).
func CollNamed(name string) (Coll, bool) {
	if strings.EqualFold(name, "bcast") {
		return Broadcast, true
	}
	for c := AllReduce; c <= Barrier; c++ {
		if strings.EqualFold(collNames[c], name) {
			return c, true
		}
	}
	return 0, false
}

// Reduces reports whether the collective combines values with a reduction op.
func (c Coll) Reduces() bool { return c == AllReduce || c == Reduce || c == ReduceScatter }

// Rooted reports whether the collective has a root.
func (c Coll) Rooted() bool { return c == Reduce || c == Broadcast || c == Gather || c == Scatter }

// Spec describes one collective call as every rank sees it: enough for an
// algorithm to build any rank's program and for the verifier to know what
// every rank must end with.
//
// Buffer layouts, in elements (c = Counts[r], D(b) = Displ(b), T = Total()):
//
//	coll           In (rank r)        Out (rank r)        in place
//	AllReduce      c                  c                   In is Out
//	Reduce         c                  c at root, else 0   at root, In is Out
//	Broadcast      0                  c                   always: root's Out holds the data on entry
//	AllGather      c                  T                   In is Out[D(r):+c]
//	ReduceScatter  T                  c                   Out is In[D(r):+c]
//	AllToAll       ΣMatrix[r][*]      ΣMatrix[*][r]       In is Out (Matrix symmetric)
//	Gather         c                  T at root, else 0   at root, In is Out[D(root):+c]
//	Scatter        T at root, else 0  c                   at root, Out is In[D(root):+c]
//	Barrier        0                  0                   -
//
// For AllReduce, Reduce and Broadcast every Counts[r] is the same count.
// For AllToAll, Matrix[s][d] elements go from rank s to rank d; blocks are
// contiguous in rank order on both sides. At run time a rank knows only its
// own row and column of Matrix; AllToAll algorithms must read nothing else.
type Spec struct {
	Coll    Coll
	N       int
	Root    int
	Counts  []int
	Matrix  [][]int
	InPlace bool
}

// Uniform returns the spec of a collective where every rank contributes count
// elements (for AllToAll: count elements to every peer).
func Uniform(coll Coll, n, count, root int, inPlace bool) Spec {
	s := Spec{Coll: coll, N: n, Root: root, InPlace: inPlace}
	if coll == AllToAll {
		s.Matrix = make([][]int, n)
		for i := range s.Matrix {
			s.Matrix[i] = make([]int, n)
			for j := range s.Matrix[i] {
				s.Matrix[i][j] = count
			}
		}
		return s
	}
	s.Counts = make([]int, n)
	for i := range s.Counts {
		s.Counts[i] = count
	}
	return s
}

// Count returns rank r's block size (Counts[r]).
func (s Spec) Count(r int) int {
	if r < 0 || r >= len(s.Counts) {
		return 0
	}
	return s.Counts[r]
}

// Displ returns the offset of rank b's block: the sum of Counts[:b].
func (s Spec) Displ(b int) int {
	d := 0
	for _, c := range s.Counts[:b] {
		d += c
	}
	return d
}

// Total returns the sum of Counts.
func (s Spec) Total() int { return s.Displ(len(s.Counts)) }

// SendDispl returns where rank s's block for rank d starts in s's In
// (AllToAll).
func (s Spec) SendDispl(src, dst int) int {
	o := 0
	for _, c := range s.Matrix[src][:dst] {
		o += c
	}
	return o
}

// RecvDispl returns where the block from rank src starts in rank dst's Out
// (AllToAll).
func (s Spec) RecvDispl(dst, src int) int {
	o := 0
	for k := 0; k < src; k++ {
		o += s.Matrix[k][dst]
	}
	return o
}

// Lens returns the lengths of rank r's In and Out buffers.
func (s Spec) Lens(r int) (in, out int) {
	c := s.Count(r)
	switch s.Coll {
	case AllReduce:
		return c, c
	case Reduce:
		if r == s.Root {
			return c, c
		}
		return c, 0
	case Broadcast:
		return 0, c
	case AllGather:
		return c, s.Total()
	case ReduceScatter:
		return s.Total(), c
	case AllToAll:
		for k := 0; k < s.N; k++ {
			in += s.Matrix[r][k]
			out += s.Matrix[k][r]
		}
		return in, out
	case Gather:
		if r == s.Root {
			return c, s.Total()
		}
		return c, 0
	case Scatter:
		if r == s.Root {
			return s.Total(), c
		}
		return 0, c
	}
	return 0, 0
}

// Alias describes how In and Out share storage on one rank when the call is
// in place: In[i] is Out[i+InOff] (or Out[i] is In[i+OutOff]).
type Alias struct {
	Aliased bool
	InOff   int // In[i] is Out[InOff+i]  (AllReduce, Reduce, AllGather, Gather, AllToAll)
	OutOff  int // Out[i] is In[OutOff+i] (ReduceScatter, Scatter)
}

// AliasOf returns how rank r's buffers alias.
func (s Spec) AliasOf(r int) Alias {
	if !s.InPlace {
		return Alias{}
	}
	switch s.Coll {
	case AllReduce, AllToAll:
		return Alias{Aliased: true}
	case Reduce:
		return Alias{Aliased: r == s.Root}
	case AllGather:
		return Alias{Aliased: true, InOff: s.Displ(r)}
	case Gather:
		if r == s.Root {
			return Alias{Aliased: true, InOff: s.Displ(r)}
		}
	case ReduceScatter:
		return Alias{Aliased: true, OutOff: s.Displ(r)}
	case Scatter:
		if r == s.Root {
			return Alias{Aliased: true, OutOff: s.Displ(r)}
		}
	}
	return Alias{}
}

// Validate checks that the spec is well formed.
func (s Spec) Validate() error {
	if s.N < 1 {
		return fmt.Errorf("sched: %d ranks", s.N)
	}
	if s.Coll < AllReduce || s.Coll > Barrier {
		return fmt.Errorf("sched: unknown collective %d", s.Coll)
	}
	if s.Coll.Rooted() && (s.Root < 0 || s.Root >= s.N) {
		return fmt.Errorf("sched: root %d outside [0,%d)", s.Root, s.N)
	}
	if s.Coll == AllToAll {
		if len(s.Matrix) != s.N {
			return errors.New("sched: AllToAll needs an N×N matrix")
		}
		for i, row := range s.Matrix {
			if len(row) != s.N {
				return errors.New("sched: AllToAll needs an N×N matrix")
			}
			for j, v := range row {
				if v < 0 {
					return fmt.Errorf("sched: negative count %d at [%d][%d]", v, i, j)
				}
				if s.InPlace && v != s.Matrix[j][i] {
					return errors.New("sched: in-place AllToAll needs a symmetric matrix")
				}
			}
		}
		return nil
	}
	if s.Coll == Barrier {
		return nil
	}
	if len(s.Counts) != s.N {
		return fmt.Errorf("sched: %d counts for %d ranks", len(s.Counts), s.N)
	}
	for i, c := range s.Counts {
		if c < 0 {
			return fmt.Errorf("sched: negative count %d for rank %d", c, i)
		}
		if (s.Coll == AllReduce || s.Coll == Reduce || s.Coll == Broadcast) && c != s.Counts[0] {
			return fmt.Errorf("sched: %s needs equal counts", s.Coll)
		}
	}
	return nil
}
