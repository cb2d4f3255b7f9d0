package main

import (
	"context"

	"github.com/hcomm-go/hcomm"
)

// One-sided operations and a local copy, measured like the collectives:
// every rank accesses the next rank's window (a ring), so a row's time is
// one access per rank. They are not part of -op all.
//
//	put, get           on an AllocWindow window (mapped between local ranks)
//	put-user, get-user on a NewWindow window over Go memory (process_vm_* locally)
//	putsignal          PutSignal to the next rank, then WaitSignal for the previous one's
//	sendrecv           Send to the next rank beside Recv from the previous one (two-sided, for comparison)
//	memcpy             a copy of the same size on each rank, for comparison
func init() {
	one := func(int) float64 { return 1 }
	benchOps["put"] = benchOp{setupWindowOp("put", true), one}
	benchOps["get"] = benchOp{setupWindowOp("get", true), one}
	benchOps["put-user"] = benchOp{setupWindowOp("put", false), one}
	benchOps["get-user"] = benchOp{setupWindowOp("get", false), one}
	benchOps["putsignal"] = benchOp{setupWindowOp("putsignal", true), one}
	benchOps["sendrecv"] = benchOp{setupSendRecv, one}
	benchOps["memcpy"] = benchOp{setupMemcpy, one}
}

func setupSendRecv(c *hcomm.Comm, size int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := max(size, 1)
	me, next, prev := c.Rank(), (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
	send, recv := make([]byte, n), make([]byte, n)
	sent := make(chan error, 1)
	return bench{bytes: n, count: n, typ: "uint8", root: -1,
		run: func(ctx context.Context) error {
			go func() { sent <- hcomm.Send(ctx, c, send, next, 0) }()
			err := hcomm.Recv(ctx, c, recv, prev, 0)
			if serr := <-sent; err == nil {
				err = serr
			}
			return err
		},
		fill: func() {
			clear(recv)
			for i := range send {
				send[i] = patternByte(me, i)
			}
		},
		wrong: func() (bad int64) {
			for i, v := range recv {
				if v != patternByte(prev, i) {
					bad++
				}
			}
			return bad
		}}
}

// perfWindow is the window of the point being measured. Every rank sets
// up the same points in the same order, so closing the previous point's
// window at the next setup is collective.
var perfWindow *hcomm.Window

func setupWindowOp(kind string, alloc bool) func(*hcomm.Comm, int64, bool, hcomm.DType, hcomm.Op) bench {
	return func(c *hcomm.Comm, size int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
		ctx := context.Background()
		fail := func(err error) bench {
			return bench{typ: "uint8", root: -1, run: func(context.Context) error { return err },
				fill: func() {}, wrong: func() int64 { return 0 }}
		}
		if perfWindow != nil {
			perfWindow.Close(ctx)
			perfWindow = nil
		}
		n := int(max(size, 1))
		var w *hcomm.Window
		var err error
		if alloc {
			w, err = c.AllocWindow(ctx, n)
		} else {
			w, err = c.NewWindow(ctx, make([]byte, n))
		}
		if err != nil {
			return fail(err)
		}
		perfWindow = w
		me, next, prev := c.Rank(), (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		buf := make([]byte, n)
		var signals uint64
		b := bench{bytes: int64(n), count: int64(n), typ: "uint8", root: -1}
		switch kind {
		case "put":
			b.run = func(ctx context.Context) error { return w.Put(ctx, next, 0, buf) }
		case "get":
			b.run = func(ctx context.Context) error { return w.Get(ctx, next, 0, buf) }
		case "putsignal":
			b.run = func(ctx context.Context) error {
				if err := w.PutSignal(ctx, next, 0, buf, 0, 1); err != nil {
					return err
				}
				signals++
				_, err := w.WaitSignal(ctx, 0, signals)
				return err
			}
		}
		b.fill = func() {
			mine := w.Bytes()
			for i := range buf {
				if kind == "get" {
					buf[i] = 0
					mine[i] = patternByte(me, i)
				} else {
					buf[i] = patternByte(me, i)
					mine[i] = 0
				}
			}
		}
		b.wrong = func() (bad int64) {
			got, from := w.Bytes(), prev
			if kind == "get" {
				got, from = buf, next
			} else if err := w.Fence(context.Background()); err != nil {
				return int64(n)
			}
			for i, v := range got {
				if v != patternByte(from, i) {
					bad++
				}
			}
			return bad
		}
		return b
	}
}

func setupMemcpy(c *hcomm.Comm, size int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := max(size, 1)
	src, dst := make([]byte, n), make([]byte, n)
	return bench{bytes: n, count: n, typ: "uint8", root: -1,
		run: func(context.Context) error { copy(dst, src); return nil },
		fill: func() {
			clear(dst)
			for i := range src {
				src[i] = patternByte(c.Rank(), i)
			}
		},
		wrong: func() (bad int64) {
			for i, v := range dst {
				if v != patternByte(c.Rank(), i) {
					bad++
				}
			}
			return bad
		}}
}
