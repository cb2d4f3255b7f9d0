package zcopy

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport/shm"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// BenchmarkSymmetric runs the zero-copy AllGather and AllToAll (and, for
// comparison, the rooted Broadcast from rank 0) of 2 ranks
// (goroutines of this process, the shm transport, registered buffers:
// the records, the copies and the done round of the real path), with
// large blocks written around the caches (stores=bypass), with plain
// stores (plain) or either way as timing chooses (timed, as the calls
// do: stores.go), and with the waits for the peers' records
// polling first (wait=poll, as the calls do: linger) or blocking in the
// transport's receive at once (wait=block), and AllGather pushing
// (push, as the calls do: every output registered) or pulling (pull).
// Besides the mean it reports rank 0's fastest
// call (min-µs) and its median (med-µs): under load the mean is mostly
// the ranks waiting for each other's time slices, the minimum is what
// the path costs. B/s counts the whole output (hcomm perf's bytes).
//
//	go test -run '^$' -bench Symmetric -count 3 ./internal/zcopy
func BenchmarkSymmetric(b *testing.B) {
	for _, coll := range []sched.Coll{sched.AllGather, sched.AllToAll, sched.Broadcast} {
		for _, n := range []int{512 << 10, 2 << 20, 8 << 20, 32 << 20} {
			for _, stores := range []string{"bypass", "plain", "timed"} {
				plain := stores == "plain"
				for _, block := range []bool{false, true} {
					wait := "poll"
					if block {
						wait = "block"
					}
					for _, pull := range []bool{false, true} {
						if pull && coll != sched.AllGather {
							continue
						}
						name := fmt.Sprintf("%v/%dKiB/stores=%s/wait=%s", coll, n>>10, stores, wait)
						if coll == sched.AllGather {
							name += map[bool]string{false: "/push", true: "/pull"}[pull]
						}
						b.Run(name, func(b *testing.B) {
							defer func(v, w bool) { pushOff, pickOff = v, w }(pushOff, pickOff)
							pushOff, pickOff = pull, stores == "bypass"
							symmetric1(b, coll, n, plain, block)
						})
					}
				}
			}
		}
	}
}

func symmetric1(b *testing.B, coll sched.Coll, n int, plain, block bool) {
	ctx := context.Background()
	ts, rs, bs := shmPair(b, ctx, 2*n)
	defer func(v int) { symStreamMin = v }(symStreamMin)
	if plain {
		symStreamMin = math.MaxInt
	}
	defer func(v time.Duration) { lingerMax = v }(lingerMax)
	if block {
		lingerMax = 0
	}
	var calls [2]*Call
	for r := range 2 {
		m := bs[r].B.Bytes()
		calls[r] = &Call{Coll: coll, DT: reduce.Uint8, In: m[:n/2], Out: m[n : 2*n], Count: n / 2}
		switch coll {
		case sched.AllToAll:
			calls[r].In = m[:n]
		case sched.Broadcast: // from rank 0
			calls[r].In, calls[r].Count = calls[r].Out, n
		}
	}
	run := func(r int, seq uint64) error {
		fp := wire.Fingerprint{Seq: seq, Coll: coll}
		z := Path{Rank: r, Size: 2, T: ts[r], FP: &fp, Min: 1}
		took, err := rs[r].Begin(ctx, &z, calls[r])
		if err == nil && !took {
			err = fmt.Errorf("the path was not taken")
		}
		if err == nil {
			err = rs[r].Finish(ctx, &z, calls[r])
		}
		return err
	}
	// Warm: the first calls fault the peers' pages in.
	for i := range 3 {
		errc := make(chan error, 1)
		go func() { errc <- run(1, uint64(i+1)) }()
		if err := run(0, uint64(i+1)); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	took := make([]time.Duration, b.N)
	var ph [2][][phN]int64                         // zcopyphase builds: each call's stamps, per rank
	trace := PhaseTrace && coll != sched.Broadcast // the rooted calls stamp no phases
	if trace {
		ph[0], ph[1] = make([][phN]int64, b.N), make([][phN]int64, b.N)
	}
	errc := make(chan error, 1)
	b.SetBytes(int64(n))
	b.ResetTimer()
	go func() {
		for i := range b.N {
			if err := run(1, uint64(i+4)); err != nil {
				errc <- err
				return
			}
			if trace {
				ph[1][i] = rs[1].Phases()
			}
		}
		errc <- nil
	}()
	for i := range b.N {
		t0 := time.Now()
		if err := run(0, uint64(i+4)); err != nil {
			b.Fatal(err)
		}
		took[i] = time.Since(t0)
		if trace {
			ph[0][i] = rs[0].Phases()
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[0].Nanoseconds())/1e3, "min-µs")
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "med-µs")
	if trace {
		slept := 10 * time.Microsecond // the shm receive's polling
		if !block {
			slept += lingerFor(n)
		}
		reportPhases(b, ph, int64(slept))
	}
}

// reportPhases reports, in µs, the medians over both ranks' calls of
// (zcopyphase builds):
//
//	call    Begin to Finish's end
//	copy    the copies: the peer's block, then the own block
//	wait    the two rounds' waits for the peer's records (wait1: the
//	        first round's, the meeting; wait2: the done round's, after
//	        the own block)
//	skew    how much later the later rank entered the call
//	wake    a waiting rank's delivery latency: from the peer's record
//	        out to its arrival here, over the waits that began more than
//	        the polling (linger's, if any, and the shm receive's 10 µs)
//	        before the record went out, i.e. that slept on the futex
//	slept-% the share of waits that slept
func reportPhases(b *testing.B, ph [2][][phN]int64, sleepAfter int64) {
	var call, cp, wait, wait1, wait2, skew, wake []float64
	waits, slept := 0, 0
	us := func(d int64) float64 { return float64(d) / 1e3 }
	for i := range ph[0] {
		skew = append(skew, us(max(ph[0][i][phBegin], ph[1][i][phBegin])-min(ph[0][i][phBegin], ph[1][i][phBegin])))
		for r := range 2 {
			a, o := ph[r][i], ph[1-r][i]
			call = append(call, us(a[phDone]-a[phBegin]))
			cp = append(cp, us(a[phMoved]-a[phMet]+a[phOwn]-a[phSent2]))
			wait = append(wait, us(a[phMet]-a[phSent1]+a[phDone]-a[phOwn]))
			wait1 = append(wait1, us(a[phMet]-a[phSent1]))
			wait2 = append(wait2, us(a[phDone]-a[phOwn]))
			for _, w := range [][2]int64{{a[phSent1], o[phSent1]}, {a[phOwn], o[phSent2]}} {
				if w[1] <= w[0] {
					continue // the record was out before this rank looked
				}
				waits++
				if w[1]-w[0] > sleepAfter {
					slept++
					at := a[phMet]
					if w[0] == a[phOwn] {
						at = a[phDone]
					}
					wake = append(wake, us(at-w[1]))
				}
			}
		}
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(call), "call-µs")
	b.ReportMetric(med(cp), "copy-µs")
	b.ReportMetric(med(wait), "wait-µs")
	b.ReportMetric(med(wait1), "wait1-µs")
	b.ReportMetric(med(wait2), "wait2-µs")
	b.ReportMetric(med(skew), "skew-µs")
	b.ReportMetric(med(wake), "wake-µs")
	b.ReportMetric(100*float64(slept)/float64(max(waits, 1)), "slept-%")
}

// TestSymmetricShm: the zero-copy AllGather and AllToAll of 2 ranks over
// the shm transport (whose receive the rounds poll before blocking:
// linger) deliver every block, and allocate nothing per call.
func TestSymmetricShm(t *testing.T) {
	const n = 64 << 10 // the whole output
	for _, coll := range []sched.Coll{sched.AllGather, sched.AllToAll} {
		t.Run(coll.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ts, rs, bs := shmPair(t, ctx, 2*n)
			var calls [2]*Call
			for r := range 2 {
				m := bs[r].B.Bytes()
				calls[r] = &Call{Coll: coll, DT: reduce.Uint8, In: m[:n/2], Out: m[n : 2*n], Count: n / 2}
				if coll == sched.AllToAll {
					calls[r].In = m[:n]
				}
				for i := range calls[r].In {
					calls[r].In[i] = byte(r*7 + i*13)
				}
			}
			var fps [2]wire.Fingerprint // each rank's, reused: the call itself must not allocate
			var zs [2]Path
			run := func(r int, seq uint64) error {
				fps[r] = wire.Fingerprint{Seq: seq, Coll: coll}
				zs[r] = Path{Rank: r, Size: 2, T: ts[r], FP: &fps[r], Min: 1}
				took, err := rs[r].Begin(ctx, &zs[r], calls[r])
				if err == nil && !took {
					err = fmt.Errorf("rank %d: the path was not taken", r)
				}
				if err == nil {
					err = rs[r].Finish(ctx, &zs[r], calls[r])
				}
				return err
			}
			const iters = 100
			loop := func(r int, from uint64) error {
				for i := range uint64(iters) {
					if err := run(r, from+i); err != nil {
						return err
					}
				}
				return nil
			}
			both := func(from uint64) {
				errc := make(chan error, 1)
				go func() { errc <- loop(1, from) }()
				if err := loop(0, from); err != nil {
					t.Fatal(err)
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			both(1) // warm-up
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			both(1 + iters)
			runtime.ReadMemStats(&after)
			if per := float64(after.Mallocs-before.Mallocs) / iters; !raceEnabled && per >= 1 {
				t.Errorf("%.2f allocations per call (both ranks)", per)
			}
			for r := range 2 {
				out := calls[r].Out
				for p := range 2 {
					in := calls[p].In
					blk := in // AllGather: rank p's input
					if coll == sched.AllToAll {
						blk = in[r*n/2 : (r+1)*n/2]
					}
					if got := out[p*n/2 : (p+1)*n/2]; !slices.Equal(got, blk) {
						t.Fatalf("rank %d: block %d differs from rank %d's", r, p, p)
					}
				}
			}
		})
	}
}

// probe is a transport whose Arrived answers arrived.
type probe struct {
	*shm.Transport
	arrived bool
}

func (p probe) Arrived(int) bool { return p.arrived }

// TestLingerBackoff: a poll that ends without the record makes the next
// 2^m − 1 waits block at once (m misses in a row, at most 6); a record
// found while polling ends the run.
func TestLingerBackoff(t *testing.T) {
	r := &Registry{lingerFor: time.Nanosecond}
	never := &Path{T: probe{}}
	var polls []int // the waits that polled, of 200
	for i := range 200 {
		skip := r.lingerSkip
		r.linger(never, 1)
		if skip == 0 {
			polls = append(polls, i)
		}
	}
	want := []int{0, 2, 6, 14, 30, 62, 126, 190}
	if !slices.Equal(polls, want) {
		t.Fatalf("waits that polled: %v, want %v", polls, want)
	}
	if r.lingerMiss != 6 {
		t.Errorf("misses %d, want at most 6", r.lingerMiss)
	}
	for r.lingerSkip > 0 {
		r.linger(never, 1)
	}
	r.linger(&Path{T: probe{arrived: true}}, 1)
	if r.lingerMiss != 0 || r.lingerSkip != 0 {
		t.Errorf("after a record found while polling: misses %d, skip %d; want 0, 0", r.lingerMiss, r.lingerSkip)
	}
	// Without a budget (or a transport that cannot tell) nothing polls.
	r = &Registry{}
	r.linger(never, 1)
	if r.lingerMiss != 0 {
		t.Error("a wait without a budget polled")
	}
}

// TestPushes: only a two-rank AllGather whose outputs are all registered
// pushes.
func TestPushes(t *testing.T) {
	ag, a2a := &Call{Coll: sched.AllGather}, &Call{Coll: sched.AllToAll}
	for _, tc := range []struct {
		k    *Call
		size int
		outs bool
		want bool
	}{
		{ag, 2, true, true},
		{ag, 2, false, false},
		{ag, 3, true, false},
		{ag, 4, true, false},
		{a2a, 2, true, false},
	} {
		if got := pushes(tc.k, tc.size, tc.outs); got != tc.want {
			t.Errorf("pushes(%v, %d ranks, outputs registered %v) = %v, want %v", tc.k.Coll, tc.size, tc.outs, got, tc.want)
		}
	}
}

// TestPushShm: a zero-copy AllGather of 2 ranks over shm pushes (each
// rank writes its block into both outputs) when both outputs are
// registered, in place too, and pulls when one is not; every output then
// holds both inputs. Blocks of several pieces (pushPiece) and a last
// partial one.
func TestPushShm(t *testing.T) {
	const blk = 3*pushPiece + 4096 + 8
	for _, tc := range []struct {
		name    string
		unreg1  bool // rank 1's output in ordinary memory
		inPlace bool
		push    bool
	}{
		{"registered", false, false, true},
		{"in-place", false, true, true},
		{"output-unregistered", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ts, rs, bs := shmPair(t, ctx, 4*blk)
			var calls [2]*Call
			var want []byte
			for r := range 2 {
				m := bs[r].B.Bytes()
				k := &Call{Coll: sched.AllGather, DT: reduce.Uint8, In: m[:blk], Out: m[2*blk : 4*blk], Count: blk, InPlace: tc.inPlace}
				if tc.unreg1 && r == 1 {
					k.Out = make([]byte, 2*blk)
				}
				if tc.inPlace {
					k.In = k.Out[r*blk : (r+1)*blk]
				}
				for i := range k.In {
					k.In[i] = byte(r*101 + i*7 + i>>9)
				}
				want = append(want, k.In...)
				calls[r] = k
			}
			var pushed [2]bool
			var res [2]error
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fp := wire.Fingerprint{Seq: 1, Coll: sched.AllGather}
					z := Path{Rank: r, Size: 2, T: ts[r], FP: &fp, Min: 1}
					took, err := rs[r].Begin(ctx, &z, calls[r])
					if err == nil && !took {
						err = fmt.Errorf("rank %d: the path was not taken", r)
					}
					if err == nil {
						err = rs[r].Finish(ctx, &z, calls[r])
					}
					pushed[r], res[r] = z.push, err
				}()
			}
			wg.Wait()
			for r := range 2 {
				if res[r] != nil {
					t.Fatal(res[r])
				}
				if pushed[r] != tc.push {
					t.Errorf("rank %d pushed %v, want %v", r, pushed[r], tc.push)
				}
				if !slices.Equal(calls[r].Out, want) {
					i := 0
					for calls[r].Out[i] == want[i] {
						i++
					}
					t.Errorf("rank %d: output differs from the inputs from byte %d", r, i)
				}
			}
		})
	}
}
