// Package plan chooses an algorithm for each collective call and caches the
// resulting program.
//
// The choice comes from a first α–β–γ cost model: a message costs
// α + bytes·β, a reduction bytes·γ, and each algorithm's cost is the
// standard closed form for its number of steps, bytes sent and bytes
// reduced per rank. An override (HCOMM_ALGO or Config) names the algorithm
// per collective instead.
package plan

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// Model holds the α–β–γ parameters of the cost model.
type Model struct {
	Alpha float64 // seconds per message
	Beta  float64 // seconds per byte sent
	Gamma float64 // seconds per byte reduced
	Chunk int     // bytes per pipelined chunk
}

// Defaults for memory-based transports (shared memory, in-process) and
// for TCP.
var (
	MemoryModel  = Model{Alpha: 1e-6, Beta: 1 / 8e9, Gamma: 1 / 8e9, Chunk: 1 << 20}
	NetworkModel = Model{Alpha: 30e-6, Beta: 1 / 2e9, Gamma: 1 / 8e9, Chunk: 1 << 20}
)

// Overrides maps a collective to the name of the algorithm to use for it.
type Overrides map[sched.Coll]string

var collByName = map[string]sched.Coll{
	"allreduce": sched.AllReduce, "reduce": sched.Reduce, "broadcast": sched.Broadcast,
	"bcast": sched.Broadcast, "allgather": sched.AllGather, "reducescatter": sched.ReduceScatter,
	"alltoall": sched.AllToAll, "gather": sched.Gather, "scatter": sched.Scatter, "barrier": sched.Barrier,
}

// aliases are friendlier names users reach for.
var aliases = map[sched.Coll]map[string]string{
	sched.AllReduce: {"tree": "dbtree", "recursive_doubling": "rd", "rabenseifner": "hd", "halving_doubling": "hd"},
	sched.Reduce:    {"tree": "binomial", "pipeline": "chain"},
	sched.Broadcast: {"tree": "binomial", "pipeline": "chain"},
	sched.Gather:    {"tree": "binomial"},
	sched.Scatter:   {"tree": "binomial"},
}

func resolve(c sched.Coll, name string) string {
	if a, ok := aliases[c][name]; ok {
		return a
	}
	return name
}

// ParseOverrides parses "allreduce=ring,broadcast=tree". A bare name
// ("ring") applies to every collective that has an algorithm of that name.
func ParseOverrides(s string) (Overrides, error) {
	o := Overrides{}
	for _, item := range strings.Split(s, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if item == "" {
			continue
		}
		coll, name, ok := strings.Cut(item, "=")
		if !ok {
			found := false
			for _, c := range collByName {
				if _, ok := algo.Lookup(c, resolve(c, item)); ok || slices.Contains(algo.LayoutNames(c), item) {
					o[c] = resolve(c, item)
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("unknown algorithm %q", item)
			}
			continue
		}
		c, ok := collByName[strings.TrimSpace(coll)]
		if !ok {
			return nil, fmt.Errorf("unknown collective %q in %q", coll, item)
		}
		name = resolve(c, strings.TrimSpace(name))
		if _, ok := algo.Lookup(c, name); !ok && !slices.Contains(algo.LayoutNames(c), name) {
			return nil, fmt.Errorf("no %s algorithm named %q (have %s)", c, name, names(c))
		}
		o[c] = name
	}
	return o, nil
}

func names(c sched.Coll) string {
	var s []string
	for _, a := range algo.For(c) {
		s = append(s, a.Name)
	}
	s = append(s, algo.LayoutNames(c)...)
	return strings.Join(s, ", ")
}

// ErrNoAlgorithm is returned when no algorithm supports a call.
var ErrNoAlgorithm = errors.New("plan: no algorithm supports this call")

// Planner picks and caches programs for one rank.
type Planner struct {
	rank, n   int
	model     Model
	overrides Overrides

	mu    sync.Mutex
	cache map[key]*cached

	// The host layout and its algorithms (layout.go); nil until
	// SetLayout.
	layout []algo.Algorithm
	lay    algo.Layout
	hosts  int

	// last is the most recent uniform lookup: a loop of identical calls
	// (the common case) finds its program without hashing or locking.
	last atomic.Pointer[cached]
}

type cached struct {
	k    key
	prog *sched.Program
}

type key struct {
	coll     sched.Coll
	count    int
	elemSize int
	root     int
	inPlace  bool
}

const maxCached = 512

// New returns a planner for rank of n.
func New(rank, n int, m Model, o Overrides) *Planner {
	return &Planner{rank: rank, n: n, model: m, overrides: o, cache: map[key]*cached{}}
}

// Program returns this rank's program for s. Uniform calls (every rank the
// same count) are cached; others are built each time.
func (p *Planner) Program(s sched.Spec, elemSize int) (*sched.Program, error) {
	k, cacheable := p.keyOf(s, elemSize)
	if cacheable {
		p.mu.Lock()
		c, ok := p.cache[k]
		p.mu.Unlock()
		if ok {
			return c.prog, nil
		}
	}
	a, err := p.Choose(s, elemSize)
	if err != nil {
		return nil, err
	}
	prog, err := a.Build(s, p.rank)
	if err != nil {
		return nil, err
	}
	if cacheable {
		p.mu.Lock()
		if len(p.cache) >= maxCached {
			clear(p.cache)
		}
		p.cache[k] = &cached{k: k, prog: prog}
		p.mu.Unlock()
	}
	return prog, nil
}

// Uniform returns this rank's program for a call in which every rank
// contributes count elements (AllToAll: count to every peer). A cached
// program costs no allocation.
func (p *Planner) Uniform(coll sched.Coll, count, root int, inPlace bool, elemSize int) (*sched.Program, error) {
	k := key{coll: coll, count: count, elemSize: elemSize, root: root, inPlace: inPlace}
	if coll == sched.Barrier {
		k.count = 0
	}
	if c := p.last.Load(); c != nil && c.k == k {
		return c.prog, nil
	}
	p.mu.Lock()
	c, ok := p.cache[k]
	p.mu.Unlock()
	if ok {
		p.last.Store(c)
		return c.prog, nil
	}
	s := sched.Uniform(coll, p.n, count, root, inPlace)
	if coll == sched.Barrier {
		s = sched.Spec{Coll: sched.Barrier, N: p.n}
	}
	return p.Program(s, elemSize)
}

func (p *Planner) keyOf(s sched.Spec, elemSize int) (key, bool) {
	k := key{coll: s.Coll, elemSize: elemSize, root: s.Root, inPlace: s.InPlace}
	switch s.Coll {
	case sched.Barrier:
		return k, true
	case sched.AllToAll:
		if s.N < 1 || len(s.Matrix) != s.N || len(s.Matrix[0]) != s.N {
			return k, false
		}
		c := s.Matrix[0][0]
		for _, row := range s.Matrix {
			for _, v := range row {
				if v != c {
					return k, false
				}
			}
		}
		k.count = c
		return k, true
	}
	if s.N < 1 || len(s.Counts) != s.N {
		return k, false
	}
	c := s.Counts[0]
	for _, v := range s.Counts {
		if v != c {
			return k, false
		}
	}
	k.count = c
	return k, true
}

// Choose returns the algorithm for s: the override if one is set and
// supports s, else the cheapest supported algorithm under the cost model.
func (p *Planner) Choose(s sched.Spec, elemSize int) (algo.Algorithm, error) {
	if name, ok := p.overrides[s.Coll]; ok {
		if a, ok := algo.Lookup(s.Coll, name); ok && a.Supports(s) {
			return a, nil
		}
		if a, ok := p.layoutAlgo(s.Coll, name); ok && a.Supports(s) {
			return a, nil
		}
	}
	var best algo.Algorithm
	bestCost := math.Inf(1)
	for _, a := range algo.For(s.Coll) {
		if !a.Supports(s) {
			continue
		}
		if c := p.model.Cost(a.Name, s, elemSize); c < bestCost || best.Build == nil {
			best, bestCost = a, c
		}
	}
	if best.Build == nil {
		return best, fmt.Errorf("%w: %s on %d ranks", ErrNoAlgorithm, s.Coll, s.N)
	}
	return p.chooseLayout(s, elemSize, best, bestCost), nil
}

func log2ceil(n int) float64 {
	if n <= 1 {
		return 0
	}
	return float64(bits.Len(uint(n - 1)))
}

// Cost estimates the time of algorithm name for s in seconds; unknown
// algorithms cost +Inf, so a known one is preferred.
func (m Model) Cost(name string, s sched.Spec, elemSize int) float64 {
	n := float64(s.N)
	if s.N <= 1 {
		return 0
	}
	a, b, g := m.Alpha, m.Beta, m.Gamma
	lg := log2ceil(s.N)
	pow2 := s.N&(s.N-1) == 0
	fold := 0.0 // extra steps for the non-power-of-two fold
	if !pow2 {
		fold = 2
	}
	var bytes float64 // the per-rank message size the formulas use
	switch s.Coll {
	case sched.AllToAll:
		for _, v := range s.Matrix[0] {
			bytes += float64(v * elemSize)
		}
	case sched.Barrier:
	default:
		bytes = float64(s.Total() * elemSize)
		if s.Coll == sched.AllReduce || s.Coll == sched.Reduce || s.Coll == sched.Broadcast {
			bytes = float64(s.Count(0) * elemSize)
		}
	}
	fill := math.Min(bytes, float64(m.Chunk)) // pipeline fill of one chunk
	frac := (n - 1) / n
	switch s.Coll {
	case sched.AllReduce:
		switch name {
		case "ring":
			return 2*(n-1)*a + 2*frac*bytes*b + frac*bytes*g
		case "rd":
			return (lg+fold)*(a+bytes*b) + lg*bytes*g
		case "hd":
			return (2*lg+fold)*a + 2*frac*bytes*b + frac*bytes*g + fold*bytes*b/2
		case "dbtree":
			// Every rank sends about 2m (m up the trees, m down) and
			// reduces about m, plus the pipeline's fill along the depth.
			return 2*lg*a + 2*bytes*b + bytes*g + 2*lg*fill*b
		}
	case sched.Reduce:
		switch name {
		case "binomial":
			return lg * (a + bytes*b + bytes*g)
		case "chain":
			return (n-1)*a + bytes*(b+g) + (n-2)*fill*(b+g)
		case "rsg":
			return (2*lg+fold)*a + 2*frac*bytes*b + frac*bytes*g
		}
	case sched.Broadcast:
		switch name {
		case "binomial":
			return lg * (a + bytes*b)
		case "chain":
			return (n-1)*a + bytes*b + (n-2)*fill*b
		case "sag":
			return (lg+n-1)*a + 2*frac*bytes*b
		}
	case sched.AllGather:
		switch name {
		case "ring":
			return (n-1)*a + frac*bytes*b
		case "bruck", "rd":
			return lg*a + frac*bytes*b + bytes*b/4 // local rotation copies
		}
	case sched.ReduceScatter:
		switch name {
		case "ring":
			return (n-1)*a + frac*bytes*(b+g)
		case "rh":
			return (lg+fold)*a + frac*bytes*(b+g) + fold*bytes*b/n
		}
	case sched.AllToAll:
		switch name {
		case "pairwise":
			return (n-1)*a + frac*bytes*b
		case "linear":
			return (n-1)*a + frac*bytes*b*1.1
		case "bruck":
			return lg*a + lg*bytes*b/2
		}
	case sched.Gather, sched.Scatter:
		switch name {
		case "linear":
			return (n-1)*a + frac*bytes*b
		case "binomial":
			return lg*a + frac*bytes*b*1.05
		}
	case sched.Barrier:
		switch name {
		case "dissemination":
			return lg * a
		}
	}
	return math.Inf(1)
}
