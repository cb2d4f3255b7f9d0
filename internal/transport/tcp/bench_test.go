package tcp

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
)

func benchSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkPingPong measures round trips between two goroutines of this
// process over loopback; ns/op is one round trip.
func BenchmarkPingPong(b *testing.B) {
	for _, nsocks := range []int{1, 4} {
		for _, size := range []int{8, 4 << 10, 64 << 10, 1 << 20} {
			if nsocks > 1 && size < stripeMin {
				continue
			}
			b.Run(fmt.Sprintf("nsocks=%d/%s", nsocks, benchSize(size)), func(b *testing.B) {
				w := newWorld(b, 2, nsocks)
				a, e := w.transport(0), w.transport(1)
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				stop := startEcho(b, e, ctx, size)
				defer stop()
				benchPingPong(b, ctx, a, size)
			})
		}
	}
}

func benchPingPong(b *testing.B, ctx context.Context, tr *Transport, size int) {
	p := make([]byte, size)
	fp := fpFor(0, size)
	b.SetBytes(int64(2 * size))
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.Send(ctx, 1, &fp, p); err != nil {
			b.Fatal(err)
		}
		if err := tr.Recv(ctx, 1, &fp, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream measures one-way bandwidth between two goroutines of this
// process over loopback.
func BenchmarkStream(b *testing.B) {
	for _, nsocks := range []int{1, 2, 4} {
		for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
			b.Run(fmt.Sprintf("nsocks=%d/%s", nsocks, benchSize(size)), func(b *testing.B) {
				w := newWorld(b, 2, nsocks)
				src, dst := w.transport(0), w.transport(1)
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				p, q := make([]byte, size), make([]byte, size)
				fp := fpFor(0, size)
				got := make(chan error, 1)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				go func() {
					for i := 0; i < b.N; i++ {
						if err := dst.Recv(ctx, 0, &fp, q); err != nil {
							got <- err
							return
						}
					}
					got <- nil
				}()
				for i := 0; i < b.N; i++ {
					if err := src.Send(ctx, 1, &fp, p); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-got; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkPingPongProcess measures round trips to a helper process that
// echoes every message.
func BenchmarkPingPongProcess(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 1 << 20} {
		b.Run(benchSize(size), func(b *testing.B) {
			w := newWorld(b, 2, 1)
			w.spawn(1, "echo", "HCOMM_TCP_TEST_SIZE="+strconv.Itoa(size))
			tr := w.transport(0)
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			benchPingPong(b, ctx, tr, size)
		})
	}
}

// BenchmarkPingPongPaths measures round trips between two goroutines of
// this process over two loopback paths, one socket each: small messages
// travel on the first path, with the copy kept for moving it (lead.go).
func BenchmarkPingPongPaths(b *testing.B) {
	for _, size := range []int{8, 4 << 10, 1 << 20} {
		b.Run(benchSize(size), func(b *testing.B) {
			trs, _ := multiPathWorld(b, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			stop := startEcho(b, trs[1], ctx, size)
			defer stop()
			benchPingPong(b, ctx, trs[0], size)
		})
	}
}

// BenchmarkOneWayPaths measures a small message then a large one sent from
// rank 0 to rank 1, which only receives, over two loopback paths, one
// socket each: the large message is striped behind the small one on the
// lead stream (lead.go). One op is one pair of messages, of one call (one
// fingerprint, as consecutive messages of a collective to one peer). It
// reports allocations: the Send's polls of TCP_INFO for the stripes' and
// the lead's acknowledgements allocate nothing (tcpInfoReader).
func BenchmarkOneWayPaths(b *testing.B) {
	const small, large = 64, 1 << 20
	trs, _ := multiPathWorld(b, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ps, pl := make([]byte, small), make([]byte, large)
	fp := fpFor(0, large)
	fs, fl := &fp, &fp
	done := make(chan error, 1)
	n := b.N
	go func() {
		rs, rl := make([]byte, small), make([]byte, large)
		for range n {
			if err := trs[1].Recv(ctx, 0, fs, rs); err != nil {
				done <- err
				return
			}
			if err := trs[1].Recv(ctx, 0, fl, rl); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.SetBytes(small + large)
	b.ReportAllocs()
	b.ResetTimer()
	for range n {
		if err := trs[0].Send(ctx, 1, fs, ps); err != nil {
			b.Fatal(err)
		}
		if err := trs[0].Send(ctx, 1, fl, pl); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
