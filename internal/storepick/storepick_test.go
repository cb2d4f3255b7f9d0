package storepick

import "testing"

// TestPick runs two cycles of a chooser: the trial calls alternate
// (around the caches first), the faster way by median wins the calls
// that follow, one outlier among the trials does not decide, and the
// next cycle starts with trials again.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nt, pl    [Trials]int64 // the trials' times each way
		wantPlain bool
	}{
		{"plain faster", [Trials]int64{300, 310, 290, 305, 295}, [Trials]int64{200, 210, 5000, 190, 205}, true},
		{"around faster", [Trials]int64{200, 210, 190, 5000, 205}, [Trials]int64{300, 310, 290, 305, 10}, false},
		{"tie keeps around", [Trials]int64{200, 200, 200, 200, 200}, [Trials]int64{200, 200, 200, 200, 200}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pick
			for cycle := range 2 {
				for i := range 2 * Trials {
					plain := p.Plain()
					if want := i%2 == 1; plain != want {
						t.Fatalf("cycle %d trial %d: plain %v, want %v", cycle, i, plain, want)
					}
					d := tc.nt[i/2]
					if plain {
						d = tc.pl[i/2]
					}
					p.Took(d)
				}
				for i := range Keep {
					if plain := p.Plain(); plain != tc.wantPlain {
						t.Fatalf("cycle %d call %d after the trials: plain %v, want %v", cycle, i, plain, tc.wantPlain)
					}
					p.Took(1) // later times do not change the choice within a cycle
				}
				if p.Calls() != 0 {
					t.Fatalf("cycle %d ended after %d calls, want %d", cycle, p.Calls()+2*Trials+Keep, 2*Trials+Keep)
				}
			}
		})
	}
}

// TestSet checks that each size keeps its own chooser, and that a size
// pushed out by newer ones starts afresh.
func TestSet(t *testing.T) {
	var s Set
	a := s.For(8 << 20)
	a.Took(7)
	if b := s.For(8 << 20); b != a || b.Calls() != 1 {
		t.Fatalf("the same size got another chooser (%p, %p) or lost its calls (%d)", a, b, b.Calls())
	}
	if c := s.For(12 << 20); c == a {
		t.Fatal("another size got the same chooser")
	}
	for k := 1; k <= len(s.keys); k++ {
		s.For(k)
	}
	if d := s.For(8 << 20); d.Calls() != 0 {
		t.Fatalf("a size pushed out kept %d calls", d.Calls())
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	var s Set
	if n := testing.AllocsPerRun(100, func() {
		p := s.For(4 << 20)
		p.Took(int64(len(s.keys)))
		_ = p.Plain()
	}); n != 0 {
		t.Fatalf("%v allocations a call", n)
	}
}
