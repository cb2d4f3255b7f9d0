package stall

import (
	"sync"
	"time"
)

// Slow finds persistent stragglers from what the stall check sees: each
// check of a collective that has run First lists the ranks that had not
// entered it yet. A rank late for several checked collectives in a row,
// while most of the others were on time, is a straggler this rank keeps
// waiting for. It costs nothing per collective: only checks (collectives
// that ran First) reach it.
type Slow struct {
	mu     sync.Mutex
	streak []int     // per rank: consecutive checked collectives it was late for
	noted  uint64    // the last collective noted (a long one is checked several times)
	last   time.Time // the last warning
}

// SlowStreak is how many checked collectives in a row a rank must be late
// for to be named; SlowEvery bounds the warnings of one communicator.
var (
	SlowStreak = 3
	SlowEvery  = time.Minute
)

// Note records that the check of collective seq at rank self of size ranks
// found the ranks in late not yet in it (a later check of the same
// collective changes nothing), and returns the ranks to warn about now
// (nil most of the time): those late SlowStreak times in a row, when the
// ranks late now are at most half of the others (or the one other rank)
// and no warning was given in the last SlowEvery.
func (s *Slow) Note(self, size int, seq uint64, late []int, now time.Time) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.noted {
		return nil
	}
	s.noted = seq
	if len(s.streak) != size {
		s.streak = make([]int, size)
	}
	isLate := make([]bool, size)
	for _, r := range late {
		if r >= 0 && r < size && r != self {
			isLate[r] = true
		}
	}
	for r := range s.streak {
		if isLate[r] {
			s.streak[r]++
		} else {
			s.streak[r] = 0
		}
	}
	if n := len(late); n == 0 || 2*n > size-1 && size > 2 {
		return nil // nobody, or most ranks, late: no one peer stands out
	}
	if !s.last.IsZero() && now.Sub(s.last) < SlowEvery {
		return nil
	}
	var slow []int
	for r, n := range s.streak {
		if n >= SlowStreak {
			slow = append(slow, r)
		}
	}
	if slow != nil {
		s.last = now
	}
	return slow
}

// Late returns the ranks other than self whose call of the collective is
// unknown in calls (from CallsOf): those that have not entered it.
func Late(self int, calls []string) []int {
	var late []int
	for r, c := range calls {
		if r != self && c == "" {
			late = append(late, r)
		}
	}
	return late
}
