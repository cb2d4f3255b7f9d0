package stall

import (
	"slices"
	"testing"
	"time"
)

func TestSlow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type note struct {
		late []int
		at   time.Duration // after t0
		want []int
	}
	for _, tc := range []struct {
		name  string
		self  int
		size  int
		notes []note
	}{
		{"one straggler, warned once per SlowEvery", 0, 4, []note{
			{[]int{3}, 0, nil}, {[]int{3}, 1, nil}, {[]int{3}, 2, []int{3}},
			{[]int{3}, 3, nil}, // rate-limited
			{[]int{3}, SlowEvery + 2, []int{3}},
		}},
		{"an on-time check resets the streak", 0, 4, []note{
			{[]int{3}, 0, nil}, {[]int{3}, 1, nil}, {nil, 2, nil}, {[]int{3}, 3, nil}, {[]int{3}, 4, nil},
			{[]int{3}, 5, []int{3}},
		}},
		{"different ranks late in turn", 1, 4, []note{
			{[]int{2}, 0, nil}, {[]int{3}, 1, nil}, {[]int{2}, 2, nil}, {[]int{0}, 3, nil}, {[]int{3}, 4, nil},
		}},
		{"most ranks late: no one stands out", 0, 5, []note{
			{[]int{1, 2, 3}, 0, nil}, {[]int{1, 2, 3}, 1, nil}, {[]int{1, 2, 3}, 2, nil}, {[]int{1, 2, 3}, 3, nil},
		}},
		{"two stragglers of eight", 0, 8, []note{
			{[]int{5, 6}, 0, nil}, {[]int{5, 6}, 1, nil}, {[]int{5, 6}, 2, []int{5, 6}},
		}},
		{"the one peer of two", 1, 2, []note{
			{[]int{0}, 0, nil}, {[]int{0}, 1, nil}, {[]int{0}, 2, []int{0}},
		}},
		{"self and bad ranks ignored", 1, 8, []note{
			{[]int{1, 9}, 0, nil}, {[]int{1, -1}, 1, nil}, {[]int{1, 9}, 2, nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Slow
			for i, n := range tc.notes {
				got := s.Note(tc.self, tc.size, uint64(i+1), n.late, t0.Add(n.at))
				if !slices.Equal(got, n.want) {
					t.Fatalf("note %d (late %v): %v, want %v", i, n.late, got, n.want)
				}
			}
		})
	}
}

// A long collective is checked several times; it counts once.
func TestSlowRepeatedCheck(t *testing.T) {
	var s Slow
	now := time.Unix(1000, 0)
	for range 5 {
		if got := s.Note(0, 2, 7, []int{1}, now); got != nil {
			t.Fatalf("one collective checked again and again warned about %v", got)
		}
	}
	s.Note(0, 2, 8, []int{1}, now)
	if got := s.Note(0, 2, 9, []int{1}, now); !slices.Equal(got, []int{1}) {
		t.Fatalf("third collective: %v, want [1]", got)
	}
}

func TestLate(t *testing.T) {
	if got := Late(1, []string{"", "x", "AllReduce(…)", ""}); !slices.Equal(got, []int{0, 3}) {
		t.Fatalf("Late: %v", got)
	}
}
