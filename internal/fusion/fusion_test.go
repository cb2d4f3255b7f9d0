package fusion

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// oneRank is a communicator of one rank that never runs a collective.
type oneRank struct{}

func (oneRank) Rank() int { return 0 }
func (oneRank) Size() int { return 1 }
func (oneRank) AllGather(_ context.Context, v int64) ([]int64, error) {
	return []int64{v}, nil
}
func (oneRank) AllReduce(context.Context, []byte, int) error { return nil }
func (oneRank) Launched(Launch)                              {}

func testConfig(thresh int) Config {
	return Config{Threshold: thresh, MaxElems: 1 << 40,
		Err:       func(op string, peer int, err error) error { return err },
		DTypeName: func(dt int) string { return "t" + strconv.Itoa(dt) }}
}

// A tensor too large for a buffer is refused at registration.
func TestRegisterLimits(t *testing.T) {
	b := New(oneRank{}, nil, testConfig(64))
	if _, err := b.Register("neg", 4, 4, -1, nil); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("negative length: %v", err)
	}
	if _, err := b.Register("huge", 4, 4, 1<<41, nil); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("too many elements: %v", err)
	}
	if _, err := New(nil, nil, testConfig(64)).Register("x", 4, 4, 1, nil); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("no communicator: %v", err)
	}
}

func TestBucketLayout(t *testing.T) {
	type reg struct {
		name   string
		dt, es int
		n      int
	}
	f32 := func(name string, n int) reg { return reg{name, 4, 4, n} }
	f64 := func(name string, n int) reg { return reg{name, 8, 8, n} }
	for _, tc := range []struct {
		name   string
		thresh int
		regs   []reg
		want   [][]string
	}{
		{"one bucket", 1 << 20, []reg{f32("a", 10), f32("b", 10), f32("c", 10)},
			[][]string{{"c", "b", "a"}}},
		{"split by threshold", 80, []reg{f32("a", 10), f32("b", 10), f32("c", 10), f32("d", 10)},
			[][]string{{"d", "c"}, {"b", "a"}}},
		{"big tensor closes its bucket", 100, []reg{f32("a", 5), f32("big", 1000), f32("c", 5)},
			[][]string{{"c", "big"}, {"a"}}},
		{"types apart", 1 << 20, []reg{f32("a", 4), f64("b", 4), f32("c", 4), f64("d", 4)},
			[][]string{{"d", "b"}, {"c", "a"}}},
		{"types apart, by threshold", 16, []reg{f64("x", 1), f32("a", 2), f64("y", 2), f32("b", 2), f32("c", 2)},
			[][]string{{"c", "b"}, {"y"}, {"a"}, {"x"}}},
		{"empty tensor", 1 << 20, []reg{f32("a", 0), f32("b", 3)}, [][]string{{"b", "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(oneRank{}, nil, testConfig(tc.thresh))
			for _, r := range tc.regs {
				if _, err := b.Register(r.name, r.dt, r.es, r.n, nil); err != nil {
					t.Fatal(err)
				}
			}
			b.layout()
			var got [][]string
			for i, bk := range b.buckets {
				if bk.index != i {
					t.Fatalf("bucket %d has index %d", i, bk.index)
				}
				var names []string
				for _, g := range bk.members {
					if g.dt != bk.dt {
						t.Fatalf("%s (%v) in a %v bucket", g.name, g.dt, bk.dt)
					}
					names = append(names, g.name)
				}
				got = append(got, names)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("buckets %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzBucketLayout checks the layout rule's invariants on arbitrary
// registrations: every tensor in exactly one bucket, one element type per
// bucket, members in reverse registration order, buckets ordered by their
// earliest member, and only a type's last bucket below the threshold.
func FuzzBucketLayout(f *testing.F) {
	f.Add([]byte{1, 10, 2, 20, 1, 30}, uint16(64))
	f.Add([]byte{0, 0, 3, 255, 3, 1}, uint16(1))
	f.Fuzz(func(t *testing.T, regs []byte, thresh uint16) {
		sizes := []int{1, 2, 4, 8} // element sizes; the type is named by its size here
		b := New(oneRank{}, nil, testConfig(int(thresh)+1))
		for i := 0; i+1 < len(regs); i += 2 {
			es := sizes[regs[i]%4]
			b.grads = append(b.grads, &Grad{b: b, index: len(b.grads), dt: es, es: es, n: int(regs[i+1])})
		}
		b.layout()
		seen := make([]bool, len(b.grads))
		lastSmall := map[int]int{}
		prevLow := len(b.grads)
		for k, bk := range b.buckets {
			if len(bk.members) == 0 {
				t.Fatalf("bucket %d is empty", k)
			}
			size, low := 0, len(b.grads)
			for j, g := range bk.members {
				if seen[g.index] {
					t.Fatalf("tensor %d in two buckets", g.index)
				}
				seen[g.index] = true
				if g.dt != bk.dt || g.bk != bk {
					t.Fatalf("tensor %d misfiled", g.index)
				}
				if j > 0 && g.index >= bk.members[j-1].index {
					t.Fatalf("bucket %d not in reverse registration order", k)
				}
				size += g.n * g.es
				low = min(low, g.index)
			}
			if low >= prevLow {
				t.Fatalf("bucket %d (earliest tensor %d) after one with earliest tensor %d", k, low, prevLow)
			}
			prevLow = low
			if size < b.thresh {
				if _, dup := lastSmall[bk.dt]; dup {
					t.Fatalf("two %v buckets below the threshold", bk.dt)
				}
				lastSmall[bk.dt] = k
			}
		}
		for i, ok := range seen {
			if !ok {
				t.Fatalf("tensor %d in no bucket", i)
			}
		}
	})
}
