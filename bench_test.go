package hcomm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/stall"
	"github.com/hcomm-go/hcomm/store"
)

// The benchmarks here run every rank as a goroutine of the test process:
// over the in-process transport (NewLocal), and through Init over shared
// memory and TCP on loopback, with a store server of the process for the
// rendezvous (as `hcomm run` serves; a file store would poll, and its
// polls would allocate as time passes). They report allocations of all
// ranks together per collective, and fail when a collective allocates in
// steady state (unless HCOMM_BENCH_ALLOW_ALLOCS is set, to see the figures
// anyway). Measurements with one process
// per rank, comparable with MPI and Gloo, are `hcomm perf` (BENCHMARKS.md).

// benchRanks is the number of ranks of the benchmarks.
const benchRanks = 2

var benchSizes = []int{8, 64 << 10, 4 << 20}

func benchSizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

var benchStallOnce sync.Once

// benchComms returns benchRanks communicators over transport "local", "shm"
// or "tcp"; they are closed when b ends.
func benchComms(b *testing.B, transport string) []*Comm {
	b.Helper()
	// The stall check looks at a collective still running after
	// stall.First (200 ms) and asks every rank for its state, which
	// allocates. A call of a few milliseconds can be descheduled that long
	// on a loaded machine, so the benchmarks put it out of reach: it costs
	// per stalled call, not per call. Set before any benchmark's
	// communicator exists (the tests have closed theirs), and left so,
	// since armed timers read it.
	benchStallOnce.Do(func() { stall.First = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var comms []*Comm
	if transport == "local" {
		var err error
		if comms, err = NewLocal(ctx, benchRanks, &Config{Timeout: time.Minute}); err != nil {
			b.Fatal(err)
		}
	} else {
		b.Setenv("HCOMM_TRANSPORT", transport)
		srv, err := store.NewServer(store.ServerConfig{Token: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Listen("127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Close() }) // after the communicators' Close below
		store := "tcp://" + srv.Addr().String()
		comms = make([]*Comm, benchRanks)
		errs := make([]error, benchRanks)
		var wg sync.WaitGroup
		for r := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := &Config{Rank: r, Size: benchRanks, Store: store, Token: "bench", Timeout: time.Minute}
				comms[r], errs[r] = Init(ctx, cfg)
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				for _, c := range comms {
					if c != nil {
						c.Close()
					}
				}
				b.Fatalf("Init rank %d over %s: %v", r, transport, err)
			}
		}
	}
	b.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// benchCollective runs call on every rank b.N times, after a warm-up, and
// reports the time per call of rank 0, the bytes of size per call, and the
// allocations of all ranks together per call.
func benchCollective(b *testing.B, comms []*Comm, size int64, call func(ctx context.Context, c *Comm) error) {
	ctx := context.Background()
	for range 3 { // warm-up: programs compiled and cached, buffers sized
		if err := runAll(ctx, comms, call); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make([]error, len(comms))
	for _, c := range comms[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range b.N {
				if err := call(ctx, c); err != nil {
					errs[c.Rank()] = err
					return
				}
			}
		}()
	}
	for range b.N {
		if err := call(ctx, comms[0]); err != nil {
			errs[0] = err
			break
		}
	}
	wg.Wait()
	b.StopTimer()
	runtime.ReadMemStats(&after)
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	// A few allocations over the whole run are the runtime's and the
	// testing package's (timers, GC, goroutine stacks), so, as for
	// allocs/op, whole allocations per call count: there must be none.
	allocs := float64(after.Mallocs-before.Mallocs) / float64(b.N)
	if b.N >= 100 && allocs >= 1 && os.Getenv("HCOMM_BENCH_ALLOW_ALLOCS") == "" {
		b.Errorf("%.2f allocations per call (all ranks) in steady state, want 0 (HCOMM_BENCH_ALLOW_ALLOCS=1 reports without failing)", allocs)
	}
}

// runAll runs call once on every rank.
func runAll(ctx context.Context, comms []*Comm, call func(ctx context.Context, c *Comm) error) error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[c.Rank()] = call(ctx, c)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkAllReduce measures a float32 sum AllReduce of 8 B, 64 KiB and
// 4 MiB per rank over each transport, out of place; MB/s counts the bytes
// of one rank's buffer, as nccl-tests' algbw does.
func BenchmarkAllReduce(b *testing.B) {
	for _, tr := range []string{"local", "shm", "tcp"} {
		b.Run(tr, func(b *testing.B) {
			comms := benchComms(b, tr)
			for _, size := range benchSizes {
				b.Run(benchSizeName(size), func(b *testing.B) {
					send := make([][]float32, len(comms))
					recv := make([][]float32, len(comms))
					for r := range comms {
						send[r], recv[r] = make([]float32, size/4), make([]float32, size/4)
						for i := range send[r] {
							send[r][i] = float32(r + i%5)
						}
					}
					benchCollective(b, comms, int64(size), func(ctx context.Context, c *Comm) error {
						return AllReduce(ctx, c, send[c.Rank()], recv[c.Rank()], Sum)
					})
				})
			}
		})
	}
}

// BenchmarkCollectives measures the other collectives at 64 KiB and
// 4 MiB over the in-process transport (sizes as in nccl-tests: the whole
// receive buffer for AllGather, the whole send buffer for ReduceScatter
// and AllToAll, the buffer for Broadcast), and Barrier.
func BenchmarkCollectives(b *testing.B) {
	comms := benchComms(b, "local")
	n := len(comms)
	for _, size := range benchSizes[1:] {
		bufs := func() [][]byte {
			s := make([][]byte, n)
			for r := range s {
				s[r] = make([]byte, size)
			}
			return s
		}
		a, z := bufs(), bufs()
		per := size / n
		cases := []struct {
			name string
			call func(ctx context.Context, c *Comm) error
		}{
			{"AllGather", func(ctx context.Context, c *Comm) error {
				return AllGather(ctx, c, a[c.Rank()][:per], z[c.Rank()])
			}},
			{"ReduceScatter", func(ctx context.Context, c *Comm) error {
				return c.ReduceScatterBytes(ctx, a[c.Rank()], z[c.Rank()][:per], DTypeFloat32, Sum)
			}},
			{"Broadcast", func(ctx context.Context, c *Comm) error {
				return Broadcast(ctx, c, a[c.Rank()], 0)
			}},
			{"AllToAll", func(ctx context.Context, c *Comm) error {
				return AllToAll(ctx, c, a[c.Rank()], z[c.Rank()])
			}},
		}
		for _, tc := range cases {
			b.Run(tc.name+"/"+benchSizeName(size), func(b *testing.B) {
				benchCollective(b, comms, int64(size), tc.call)
			})
		}
	}
	b.Run("Barrier", func(b *testing.B) {
		benchCollective(b, comms, 0, func(ctx context.Context, c *Comm) error { return c.Barrier(ctx) })
	})
}
