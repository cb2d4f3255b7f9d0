// Package plan chooses an algorithm for each collective call and caches the
// resulting program.
//
// The choice comes from the α–β–γ cost model: a message costs α plus β
// per byte, a reduction γ per byte, and each algorithm's cost function
// (algo.Algorithm.Cost) gives the messages, bytes moved and bytes reduced on
// its critical path. The planner iterates over the algorithms registered
// for the collective and takes the cheapest. An override (HCOMM_ALGO or
// Config) names the algorithm per collective instead.
package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// Model holds the parameters of the cost model: α, β, γ and δ (see
// algo.Cost).
type Model struct {
	Alpha float64 // seconds per message
	Beta  float64 // seconds per byte sent
	Gamma float64 // seconds per byte reduced
	Delta float64 // seconds per byte copied within a rank
	Chunk int     // bytes per pipelined chunk
}

// Defaults for memory-based transports (shared memory, in-process) and
// for TCP.
var (
	MemoryModel  = Model{Alpha: 1e-6, Beta: 1 / 8e9, Gamma: 1 / 8e9, Delta: 1 / 8e9, Chunk: 1 << 20}
	NetworkModel = Model{Alpha: 30e-6, Beta: 1 / 2e9, Gamma: 1 / 8e9, Delta: 1 / 8e9, Chunk: 1 << 20}
)

// Overrides maps a collective to the name of the algorithm to use for it.
type Overrides map[sched.Coll]string

// aliases are friendlier names users reach for.
var aliases = map[sched.Coll]map[string]string{
	sched.AllReduce: {"tree": "dbtree", "recursive_doubling": "rd", "rabenseifner": "hd", "halving_doubling": "hd"},
	sched.Reduce:    {"tree": "binomial", "pipeline": "chain"},
	sched.Broadcast: {"tree": "binomial", "pipeline": "chain"},
	sched.AllGather: {"recursive_doubling": "rd"},
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
			for c := sched.AllReduce; c <= sched.Barrier; c++ {
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
		c, ok := sched.CollNamed(strings.TrimSpace(coll))
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
	inter  *algo.Link             // SetInterLink; nil: the model's α and β
	crowd  float64                // SetCrowd: ranks per CPU on the most crowded kernel
	ratios map[linkKey]linkRatios // onHosts' measurements, under mu

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
// supports s, else the cheapest supported algorithm under the cost model,
// the earlier registered one on equal cost.
//
// Every rank must choose the same algorithm, so the choice reads only what
// every rank knows alike: whether a call is in place is each rank's own
// affair (a root may pass one buffer while the others pass two), so every
// call is priced as out of place; and an AllToAll whose counts are not all
// equal, of which each rank knows only its own row and column, gets the
// first registered algorithm that supports it.
func (p *Planner) Choose(s sched.Spec, elemSize int) (algo.Algorithm, error) {
	if name, ok := p.overrides[s.Coll]; ok {
		if a, ok := algo.Lookup(s.Coll, name); ok && a.Supports(s) {
			return a, nil
		}
		if a, ok := p.layoutAlgo(s.Coll, name); ok && a.Supports(s) {
			return a, nil
		}
	}
	bytes, priced := callBytes(s, elemSize)
	linked := priced && p.pricesLinks(s, elemSize)
	var best algo.Algorithm
	bestCost := math.Inf(1)
	for _, a := range algo.For(s.Coll) {
		if !a.Supports(s) {
			continue
		}
		if !priced {
			best = a
			break
		}
		c := p.model.Cost(a, s.N, s.Root, bytes)
		if linked {
			if lc, ok := p.onHosts(a, s, elemSize); ok {
				c = lc
			}
		}
		if c < bestCost || best.Build == nil {
			best, bestCost = a, c
		}
	}
	if best.Build == nil {
		return best, fmt.Errorf("%w: %s on %d ranks", ErrNoAlgorithm, s.Coll, s.N)
	}
	return p.chooseLayout(s, elemSize, best, bestCost, linked), nil
}

// callBytes returns the size of s in bytes as the cost functions take it
// (see package algo), and false for an AllToAll that is not uniform with a
// nonzero count, which is not priced.
func callBytes(s sched.Spec, elemSize int) (float64, bool) {
	switch s.Coll {
	case sched.Barrier:
		return 0, true
	case sched.AllToAll:
		if s.N < 1 || len(s.Matrix) != s.N {
			return 0, false
		}
		c := s.Matrix[0][0]
		for _, row := range s.Matrix {
			if len(row) != s.N {
				return 0, false
			}
			for _, v := range row {
				if v != c {
					return 0, false
				}
			}
		}
		return float64(s.N * c * elemSize), c > 0
	case sched.AllReduce, sched.Reduce, sched.Broadcast:
		return float64(s.Count(0) * elemSize), true
	}
	return float64(s.Total() * elemSize), true
}

// SpecCost estimates the time in seconds of algorithm a on the call s with
// elements of elemSize bytes, as Choose prices it (an AllToAll with unequal
// counts, which Choose does not price, by its largest row).
func (m Model) SpecCost(a algo.Algorithm, s sched.Spec, elemSize int) float64 {
	bytes, priced := callBytes(s, elemSize)
	if !priced {
		for _, row := range s.Matrix {
			sum := 0
			for _, v := range row {
				sum += v
			}
			bytes = max(bytes, float64(sum*elemSize))
		}
	}
	return m.Cost(a, s.N, s.Root, bytes)
}

// Cost estimates the time in seconds of algorithm a on a call of the given
// size in bytes over n ranks (root: the root of a rooted call), out of
// place, from a's cost function.
func (m Model) Cost(a algo.Algorithm, n, root int, bytes float64) float64 {
	c := a.Cost(algo.Shape{P: n, Root: root, N: bytes, Chunk: float64(m.Chunk)})
	return c.Time(m.Alpha, m.Beta, m.Gamma, m.Delta, bytes)
}
