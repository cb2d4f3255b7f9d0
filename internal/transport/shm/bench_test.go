//go:build linux

package shm

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Commands rank 0 sends to the echo role of a benchmark child.
const (
	cmdQuit = iota
	cmdPingPong
	cmdStream
)

var cmdFP, dataFP = fpFor(1<<40, 24), fpFor(1<<41, 0)

const benchMax = 4 << 20

func sendCmd(ctx context.Context, tr *Transport, op, n, size int) error {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(op))
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	binary.LittleEndian.PutUint64(b[16:], uint64(size))
	return tr.Send(ctx, 1, &cmdFP, b[:])
}

// benchEcho serves rank 0's benchmark commands.
func benchEcho(ctx context.Context, tr *Transport) error {
	buf := make([]byte, benchMax)
	var cmd [24]byte
	for {
		if err := tr.Recv(ctx, 0, &cmdFP, cmd[:]); err != nil {
			return err
		}
		op := binary.LittleEndian.Uint64(cmd[0:])
		n := int(binary.LittleEndian.Uint64(cmd[8:]))
		b := buf[:binary.LittleEndian.Uint64(cmd[16:])]
		switch op {
		case cmdQuit:
			return nil
		case cmdPingPong:
			for range n {
				if err := tr.Recv(ctx, 0, &dataFP, b); err != nil {
					return err
				}
				if err := tr.Send(ctx, 0, &dataFP, b); err != nil {
					return err
				}
			}
		case cmdStream:
			for range n {
				if err := tr.Recv(ctx, 0, &dataFP, b); err != nil {
					return err
				}
			}
			if err := tr.Send(ctx, 0, &dataFP, b[:0]); err != nil {
				return err
			}
		}
	}
}

var benchSizes = []int{8, 4 << 10, 64 << 10, 1 << 20, 4 << 20}

// benchPair runs fn against an echo peer: another process, or a goroutine
// with its own transport when inProcess is set.
func benchPair(b *testing.B, variant string, inProcess bool, fn func(b *testing.B, tr *Transport)) {
	var tr *Transport
	done := make(chan error, 1)
	if inProcess {
		trs := newLocalGroup(b, 2, variant)
		tr = trs[0]
		go func() { done <- benchEcho(context.Background(), trs[1]) }()
	} else {
		c := startCluster(b, 2, 0, "echo", variant)
		tr = c.transport()
		defer c.wait()
		close(done)
	}
	defer func() {
		if err := sendCmd(context.Background(), tr, cmdQuit, 0, 0); err != nil {
			b.Error(err)
		}
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	fn(b, tr)
}

func pingPong(b *testing.B, tr *Transport) {
	ctx := context.Background()
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			buf := make([]byte, size)
			if err := sendCmd(ctx, tr, cmdPingPong, b.N, size); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := tr.Send(ctx, 1, &dataFP, buf); err != nil {
					b.Fatal(err)
				}
				if err := tr.Recv(ctx, 1, &dataFP, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/2/float64(time.Microsecond), "µs/one-way")
		})
	}
}

func stream(b *testing.B, tr *Transport) {
	ctx := context.Background()
	for _, size := range benchSizes[1:] {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			buf := make([]byte, size)
			if err := sendCmd(ctx, tr, cmdStream, b.N, size); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := tr.Send(ctx, 1, &dataFP, buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := tr.Recv(ctx, 1, &dataFP, buf[:0]); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkPingPong measures round trips between two processes; the
// µs/one-way metric is half a round trip.
func BenchmarkPingPong(b *testing.B) {
	for _, v := range []string{"default", "nocma"} {
		b.Run(v, func(b *testing.B) { benchPair(b, v, false, pingPong) })
	}
}

// BenchmarkStream measures one-way bandwidth between two processes.
func BenchmarkStream(b *testing.B) {
	for _, v := range []string{"default", "nocma"} {
		b.Run(v, func(b *testing.B) { benchPair(b, v, false, stream) })
	}
}

// BenchmarkGoroutinePingPong is BenchmarkPingPong between two transports
// of one process.
func BenchmarkGoroutinePingPong(b *testing.B) {
	benchPair(b, "default", true, pingPong)
}

// BenchmarkGroupGoroutines measures small group calls between two
// transports of one process, each driven by its own goroutine: the
// transport's part of a small collective, without the root package's
// call path.
func BenchmarkGroupGoroutines(b *testing.B) {
	for _, tc := range []struct {
		name string
		coll sched.Coll
		size int
	}{
		{"Barrier", sched.Barrier, 0},
		{"AllReduce8B", sched.AllReduce, 8},
		{"Broadcast8B", sched.Broadcast, 8},
		{"AllGather8B", sched.AllGather, 8},
		{"AllToAll8B", sched.AllToAll, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			trs := newLocalGroup(b, 2, "default")
			ctx := context.Background()
			bufs := func() ([]byte, []byte) {
				switch tc.coll {
				case sched.AllGather:
					return make([]byte, tc.size), make([]byte, 2*tc.size)
				case sched.Broadcast:
					return nil, make([]byte, tc.size)
				}
				return make([]byte, tc.size), make([]byte, tc.size)
			}
			fpOf := func(s uint64) wire.Fingerprint {
				dt := reduce.Uint8
				if tc.coll == sched.AllReduce {
					dt = reduce.Float32
				}
				return wire.Fingerprint{Seq: s, Coll: tc.coll, DType: dt, Op: reduce.Sum, Count: int64(tc.size)}
			}
			n := b.N
			done := make(chan error, 1)
			go func() {
				in, out := bufs()
				a := &arm{ctx: ctx}
				for s := range n {
					fp := fpOf(uint64(s + 1))
					if err := trs[1].GroupRun(a, &fp, in, out); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			in, out := bufs()
			a := &arm{ctx: ctx}
			b.ReportAllocs()
			for s := range n {
				fp := fpOf(uint64(s + 1))
				if err := trs[0].GroupRun(a, &fp, in, out); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkGroupBroadcastPair runs a 2-rank 8-byte Broadcast's root and
// reader in turn on one goroutine, so that neither ever waits: the
// transport's software cost of one call on each side, without the cache
// line's trip between CPUs.
func BenchmarkGroupBroadcastPair(b *testing.B) {
	trs := newLocalGroup(b, 2, "default")
	ctx := context.Background()
	buf0, buf1 := make([]byte, 8), make([]byte, 8)
	a0, a1 := &arm{ctx: ctx}, &arm{ctx: ctx}
	b.ReportAllocs()
	s := uint64(0)
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	for b.Loop() {
		s++
		fp := wire.Fingerprint{Seq: s, Coll: sched.Broadcast, DType: reduce.Uint8, Count: 8}
		if err := trs[0].GroupRun(a0, &fp, nil, buf0); err != nil {
			b.Fatal(err)
		}
		if err := trs[1].GroupRun(a1, &fp, nil, buf1); err != nil {
			b.Fatal(err)
		}
	}
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	// On a loaded machine the process's CPU time per call is steadier
	// than its wall time.
	b.ReportMetric(float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano())/float64(b.N), "cpu-ns/op")
	if a0.n+a1.n != 0 {
		b.Fatalf("a call waited (%d, %d)", a0.n, a1.n)
	}
}
