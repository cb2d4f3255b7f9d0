// Package storepick chooses between two ways of writing large blocks —
// through the caches (plain stores) or around them (non-temporal stores)
// — by timing the caller's own calls, per call size: neither wins
// everywhere on a machine whose caches and cores other programs share
// (the callers say what was measured: internal/zcopy). The way a block
// is stored changes no byte and no message, so each rank chooses alone.
package storepick

// Trials is the number of trial calls each way at the start of a cycle;
// Keep the calls that follow with the faster way.
const (
	Trials = 5
	Keep   = 200
)

// Pick chooses the stores of one call size by timing: a cycle is
// 2·Trials trial calls, alternately around the caches (even) and through
// them (odd), then Keep calls the faster way by the median of its trials
// (a tie keeps them around the caches); then the next cycle. The zero
// value is ready; it is not safe for concurrent use.
type Pick struct {
	n   int  // calls of the current cycle so far
	use bool // through the caches after this cycle's trials
	t   [2 * Trials]int64
}

// Plain reports whether the next call writes through the caches.
func (p *Pick) Plain() bool {
	if p.n < 2*Trials {
		return p.n%2 == 1
	}
	return p.use
}

// Took records that the call Plain described took d (nanoseconds, or
// any unit, the same for every call).
func (p *Pick) Took(d int64) {
	if p.n < 2*Trials {
		p.t[p.n] = d
	}
	p.n++
	if p.n == 2*Trials {
		p.use = median(&p.t, 1) < median(&p.t, 0)
	}
	if p.n >= 2*Trials+Keep {
		p.n = 0
	}
}

// Calls returns the calls of the current cycle so far.
func (p *Pick) Calls() int { return p.n }

// median returns the median of t[first], t[first+2], ... (Trials values).
func median(t *[2 * Trials]int64, first int) int64 {
	var v [Trials]int64
	for i := range v {
		v[i] = t[first+2*i]
	}
	for i := 1; i < len(v); i++ { // insertion sort: five values, no allocation
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
	return v[len(v)/2]
}

// Set holds the choosers of the last few call sizes. The zero value is
// ready; it is not safe for concurrent use.
type Set struct {
	keys [4]int // 0: unused
	p    [4]Pick
	next int // the entry a new size replaces
}

// For returns the chooser of calls of size key (> 0), a fresh one if key
// is not among the last few sizes.
func (s *Set) For(key int) *Pick {
	for i, k := range s.keys {
		if k == key {
			return &s.p[i]
		}
	}
	i := s.next
	s.next = (s.next + 1) % len(s.keys)
	s.keys[i], s.p[i] = key, Pick{}
	return &s.p[i]
}
