package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// bits is a plain model of a rank set.
type bits map[int32]bool

func (t *setTable) toBits(id setID) bits {
	var buf [2]span
	m := bits{}
	for _, s := range t.decode(id, &buf) {
		for r := s.lo; r <= s.hi; r++ {
			m[r] = true
		}
	}
	return m
}

// fromBits interns the set m (non-empty).
func (t *setTable) fromBits(m bits) setID {
	ranks := make([]int32, 0, len(m))
	for r := range m {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	var sp []span
	for _, r := range ranks {
		if n := len(sp); n > 0 && sp[n-1].hi+1 == r {
			sp[n-1].hi = r
			continue
		}
		sp = append(sp, span{r, r})
	}
	return t.intern(sp)
}

// randomBits returns a random non-empty set of ranks below n, made of a few
// intervals.
func randomBits(rng *rand.Rand, n int) bits {
	m := bits{}
	for k := 1 + rng.IntN(4); k > 0; k-- {
		lo := rng.IntN(n)
		hi := min(n-1, lo+rng.IntN(6))
		for r := lo; r <= hi; r++ {
			m[int32(r)] = true
		}
	}
	return m
}

func TestSetUnion(t *testing.T) {
	for _, n := range []int{8, 64, inlineMax + 100} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		tab := newSetTable()
		for range 5000 {
			x, y := randomBits(rng, n), randomBits(rng, n)
			a, b := tab.fromBits(x), tab.fromBits(y)
			if a == undefined || b == undefined {
				t.Fatal("a set interned as undefined")
			}
			// Interning is canonical.
			if tab.fromBits(x) != a {
				t.Fatalf("%s interned twice differently", tab.format(a))
			}
			want := bits{}
			overlap := false
			for r := range x {
				want[r] = true
			}
			for r := range y {
				overlap = overlap || want[r]
				want[r] = true
			}
			for range 2 { // the second time from the memo
				u := tab.union(a, b)
				if u.id != tab.fromBits(want) || u.overlap != overlap {
					t.Fatalf("%s ∪ %s = %s overlap %v, want %s overlap %v", tab.format(a), tab.format(b),
						tab.format(u.id), u.overlap, tab.format(tab.fromBits(want)), overlap)
				}
			}
		}
	}
}

func TestSetFormat(t *testing.T) {
	tab := newSetTable()
	tests := []struct {
		sp      []span
		want    string
		missing string // of [0,10)
	}{
		{[]span{{0, 3}, {5, 5}}, "{0-3,5}", "{4,6-9}"},
		{[]span{{2, 2}}, "{2}", "{0-1,3-9}"},
		{[]span{{0, 9}}, "{0-9}", "{}"},
		{[]span{{0, 0}, {2, 2}, {4, 4}, {6, 9}}, "{0,2,4,6-9}", "{1,3,5}"},
		{[]span{{1, 1}, {40000, 40001}}, "{1,40000-40001}", ""},
	}
	for _, tc := range tests {
		id := tab.intern(tc.sp)
		if got := tab.format(id); got != tc.want {
			t.Errorf("format = %s, want %s", got, tc.want)
		}
		if got := tab.missing(id, 10); tc.missing != "" && got != tc.missing {
			t.Errorf("missing(%s) = %s, want %s", tc.want, got, tc.missing)
		}
	}
	if got := tab.format(undefined); got != "undefined" {
		t.Errorf("format(undefined) = %s", got)
	}
	a, b := tab.intern([]span{{0, 5}, {8, 9}}), tab.intern([]span{{4, 8}})
	if got := tab.intersect(a, b); got != "{4-5,8}" {
		t.Errorf("intersect = %s, want {4-5,8}", got)
	}
	if !tab.isRange(tab.rangeSet(0, 9), 0, 9) || tab.isRange(a, 0, 9) {
		t.Error("isRange is wrong")
	}
}

// FuzzSetUnion compares union with a plain model on sets decoded from
// bytes: each pair of bytes adds a rank interval to one of two sets.
func FuzzSetUnion(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2})
	f.Add([]byte{0, 9, 1, 200, 2, 4, 3, 5, 130, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		x, y := bits{}, bits{}
		for i := 0; i+1 < len(data); i += 2 {
			m := x
			if data[i]&1 == 1 {
				m = y
			}
			lo := int32(data[i]>>1) * 300 // spans both encodings
			for r := lo; r <= lo+int32(data[i+1]%8); r++ {
				m[r] = true
			}
		}
		if len(x) == 0 || len(y) == 0 {
			return
		}
		tab := newSetTable()
		a, b := tab.fromBits(x), tab.fromBits(y)
		u := tab.union(a, b)
		got := tab.toBits(u.id)
		overlap := false
		for r := range x {
			overlap = overlap || y[r]
			if !got[r] {
				t.Fatalf("union lacks %d", r)
			}
		}
		for r := range y {
			if !got[r] {
				t.Fatalf("union lacks %d", r)
			}
		}
		if len(got) > len(x)+len(y) || u.overlap != overlap {
			t.Fatalf("union %s of %s and %s, overlap %v", tab.format(u.id), tab.format(a), tab.format(b), u.overlap)
		}
	})
}
