package sched

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Contribution sets.
//
// Every defined element the verifier tracks carries the set of ranks whose
// input was reduced into it, and every rank carries the set of ranks it has
// heard from. In real algorithms these sets are almost always one or two
// contiguous intervals of ranks (a ring's partial sums are cyclic intervals,
// a recursive-doubling group is an aligned block), and the same few sets
// recur on many elements and ranks. So a set is a sorted list of disjoint,
// non-adjacent, inclusive rank intervals (spans), named by a 64-bit setID:
//
//   - a set of at most two spans of ranks below 2^15 is encoded in the setID
//     itself, and the union of two such sets is a little arithmetic;
//   - any other set is hash-consed in a table and named by its index, and
//     unions involving one are memoized per pair.
//
// An element then costs a word for its set, and reducing a region costs
// constant work per run, not per rank.

// setID names a set of ranks. The zero setID is not a set: in an element it
// means "undefined".
type setID uint64

// undefined marks an element that holds no defined value.
const undefined setID = 0

// Layout of an inline setID: the inline bit, the two-spans bit, then lo0,
// hi0, lo1, hi1 in 15 bits each.
const (
	inlineBit  setID = 1 << 63
	twoSpans   setID = 1 << 62
	inlineBits       = 15
	inlineMax        = 1<<inlineBits - 1
	inlineMask       = inlineMax
)

// span is the inclusive rank interval [lo, hi].
type span struct{ lo, hi int32 }

// unionResult is a union: the set and whether the operands shared a rank.
type unionResult struct {
	id      setID
	overlap bool
}

// setTable holds the sets that do not fit in a setID. The zero value is not
// usable; use newSetTable.
type setTable struct {
	spans  [][]span // indexed by setID; spans[0] is unused
	large  map[string]setID
	unions map[[2]setID]unionResult

	// A one-entry cache in front of unions: a region is mostly reduced run
	// after run with the same pair of sets.
	lastKey [2]setID
	last    unionResult

	key []byte // scratch for keys
}

func newSetTable() *setTable {
	return &setTable{
		spans:  [][]span{nil},
		large:  make(map[string]setID),
		unions: make(map[[2]setID]unionResult),
	}
}

// decode returns the spans of id, using buf for inline sets.
func (t *setTable) decode(id setID, buf *[2]span) []span {
	if id&inlineBit == 0 {
		return t.spans[id]
	}
	field := func(i int) int32 { return int32(id >> (inlineBits * (3 - i)) & inlineMask) }
	buf[0] = span{field(0), field(1)}
	if id&twoSpans == 0 {
		return buf[:1]
	}
	buf[1] = span{field(2), field(3)}
	return buf[:2]
}

// intern returns the id of the set made of sp, which must be sorted,
// disjoint, non-adjacent and non-empty. intern does not retain sp.
func (t *setTable) intern(sp []span) setID {
	if len(sp) <= 2 && sp[len(sp)-1].hi <= inlineMax && sp[0].lo >= 0 {
		id := inlineBit | setID(sp[0].lo)<<(3*inlineBits) | setID(sp[0].hi)<<(2*inlineBits)
		if len(sp) == 2 {
			id |= twoSpans | setID(sp[1].lo)<<inlineBits | setID(sp[1].hi)
		}
		return id
	}
	t.key = t.key[:0]
	for _, s := range sp {
		t.key = binary.LittleEndian.AppendUint32(t.key, uint32(s.lo))
		t.key = binary.LittleEndian.AppendUint32(t.key, uint32(s.hi))
	}
	if id, ok := t.large[string(t.key)]; ok {
		return id
	}
	t.spans = append(t.spans, append([]span(nil), sp...))
	id := setID(len(t.spans) - 1)
	t.large[string(t.key)] = id
	return id
}

// rangeSet returns the set of ranks lo through hi (lo <= hi).
func (t *setTable) rangeSet(lo, hi int) setID {
	return t.intern([]span{{int32(lo), int32(hi)}})
}

// single returns the set {r}.
func (t *setTable) single(r int) setID { return t.rangeSet(r, r) }

// union returns a ∪ b and whether a and b share a rank. Neither may be
// undefined.
func (t *setTable) union(a, b setID) unionResult {
	if a == b {
		return unionResult{a, true}
	}
	var bx, by [2]span
	if a&b&inlineBit != 0 {
		var out [4]span
		sp, overlap := mergeSpans(out[:0], t.decode(a, &bx), t.decode(b, &by))
		return unionResult{t.intern(sp), overlap}
	}
	if a > b {
		a, b = b, a
	}
	key := [2]setID{a, b}
	if key == t.lastKey && t.last.id != undefined {
		return t.last
	}
	res, ok := t.unions[key]
	if !ok {
		var sp []span
		sp, res.overlap = mergeSpans(nil, t.decode(a, &bx), t.decode(b, &by))
		res.id = t.intern(sp)
		t.unions[key] = res
	}
	t.lastKey, t.last = key, res
	return res
}

// mergeSpans appends the union of span lists x and y to out and reports
// whether x and y share a rank.
func mergeSpans(out, x, y []span) ([]span, bool) {
	base := len(out)
	overlap := false
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		var s span
		if j == len(y) || (i < len(x) && x[i].lo <= y[j].lo) {
			s = x[i]
			i++
		} else {
			s = y[j]
			j++
		}
		if n := len(out); n > base && s.lo <= out[n-1].hi+1 {
			// Spans of one list are disjoint and non-adjacent, so
			// touching the previous output span means touching a span of
			// the other list; sharing a rank means an overlap.
			if s.lo <= out[n-1].hi {
				overlap = true
			}
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out, overlap
}

// intersect returns the ranks a and b share, rendered like format.
func (t *setTable) intersect(a, b setID) string {
	var out []span
	var bx, by [2]span
	x, y := t.decode(a, &bx), t.decode(b, &by)
	for i, j := 0, 0; i < len(x) && j < len(y); {
		lo, hi := max(x[i].lo, y[j].lo), min(x[i].hi, y[j].hi)
		if lo <= hi {
			out = append(out, span{lo, hi})
		}
		if x[i].hi < y[j].hi {
			i++
		} else {
			j++
		}
	}
	return formatSpans(out)
}

// isRange reports whether set id is exactly the ranks lo through hi.
func (t *setTable) isRange(id setID, lo, hi int) bool {
	var buf [2]span
	sp := t.decode(id, &buf)
	return len(sp) == 1 && int(sp[0].lo) == lo && int(sp[0].hi) == hi
}

// missing returns the ranks of [0, n) that id lacks, rendered like format.
func (t *setTable) missing(id setID, n int) string {
	var out []span
	next := int32(0)
	var buf [2]span
	for _, s := range t.decode(id, &buf) {
		if s.lo > next {
			out = append(out, span{next, s.lo - 1})
		}
		next = s.hi + 1
	}
	if int(next) < n {
		out = append(out, span{next, int32(n - 1)})
	}
	return formatSpans(out)
}

// format renders a set compactly, e.g. {0-3,5}.
func (t *setTable) format(id setID) string {
	if id == undefined {
		return "undefined"
	}
	var buf [2]span
	return formatSpans(t.decode(id, &buf))
}

func formatSpans(sp []span) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range sp {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(s.lo)))
		if s.hi != s.lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(s.hi)))
		}
	}
	b.WriteByte('}')
	return b.String()
}
