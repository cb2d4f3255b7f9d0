package algo

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// FuzzBuild builds every algorithm of a collective on a spec decoded from the
// fuzzer's bytes, possibly malformed. Build must never panic; when the spec
// is valid and supported, every rank's program must build and the set must
// verify.
func FuzzBuild(f *testing.F) {
	f.Add(uint8(sched.AllReduce), uint8(5), uint8(0), false, []byte{7})
	f.Add(uint8(sched.AllGather), uint8(6), uint8(2), true, []byte{1, 0, 3, 2, 0, 5})
	f.Add(uint8(sched.AllToAll), uint8(3), uint8(0), true, []byte{1, 2, 3, 2, 0, 1, 3, 1, 4})
	f.Add(uint8(sched.Scatter), uint8(7), uint8(9), false, []byte{})
	f.Fuzz(func(t *testing.T, coll, n, root uint8, inPlace bool, data []byte) {
		s := sched.Spec{Coll: sched.Coll(coll % 11), N: int(n%40) - 1, Root: int(root%48) - 2, InPlace: inPlace}
		next := func(i int) int {
			if len(data) == 0 {
				return 0
			}
			return int(int8(data[i%len(data)])) % 9
		}
		if s.N > 0 && len(data)%3 != 0 {
			if s.Coll == sched.AllToAll {
				s.Matrix = make([][]int, s.N)
				for i := range s.Matrix {
					s.Matrix[i] = make([]int, s.N)
					for j := range s.Matrix[i] {
						s.Matrix[i][j] = next(i*s.N + j)
						if inPlace && j < i {
							s.Matrix[i][j] = s.Matrix[j][i]
						}
					}
				}
			} else {
				s.Counts = make([]int, s.N)
				for i := range s.Counts {
					s.Counts[i] = next(i)
					if s.Coll == sched.AllReduce || s.Coll == sched.Reduce || s.Coll == sched.Broadcast {
						s.Counts[i] = next(0)
					}
				}
			}
		}
		for _, a := range For(s.Coll) {
			// A restricted algorithm (AllToAll bruck) need not build
			// what it does not support, but must not panic either.
			valid := s.Validate() == nil && a.Supports(s)
			progs := make([]*sched.Program, max(s.N, 0))
			for r := -1; r <= s.N; r++ {
				p, err := a.Build(s, r)
				if r < 0 || r >= s.N {
					if err == nil {
						t.Fatalf("%s %s built rank %d of %d", a.Coll, a.Name, r, s.N)
					}
					continue
				}
				if valid && err != nil {
					t.Fatalf("%s %s rank %d: %v", a.Coll, a.Name, r, err)
				}
				progs[r] = p
			}
			if valid {
				if err := sched.Verify(s, progs); err != nil {
					t.Fatalf("%s %s on %s: %v", a.Coll, a.Name, describe(s), err)
				}
			}
		}
	})
}
