package main

import (
	"context"
	"fmt"

	"github.com/hcomm-go/hcomm"
)

// pingpong: rank r of the first half sends to rank r+n/2, which sends the
// bytes back; a row's time is one round trip. With the ranks placed one
// per host, or consecutively on two hosts, every pair crosses between
// hosts: the reference for small collectives across hosts ("within 1.2×
// of the round trip"). Not part of -op all; the job needs an even number
// of ranks.
func init() {
	benchOps["pingpong"] = benchOp{setupPingPong, func(int) float64 { return 1 }}
}

func setupPingPong(c *hcomm.Comm, size int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := max(size, 1)
	me, half := c.Rank(), c.Size()/2
	if c.Size()%2 != 0 {
		err := fmt.Errorf("pingpong pairs ranks r and r+n/2: %d ranks is odd", c.Size())
		return bench{typ: "uint8", root: -1, run: func(context.Context) error { return err },
			fill: func() {}, wrong: func() int64 { return 0 }}
	}
	first := me < half
	peer := me + half
	if !first {
		peer = me - half
	}
	send, recv := make([]byte, n), make([]byte, n)
	return bench{bytes: n, count: n, typ: "uint8", root: -1,
		run: func(ctx context.Context) error {
			if first {
				if err := hcomm.Send(ctx, c, send, peer, 0); err != nil {
					return err
				}
				return hcomm.Recv(ctx, c, recv, peer, 0)
			}
			if err := hcomm.Recv(ctx, c, recv, peer, 0); err != nil {
				return err
			}
			return hcomm.Send(ctx, c, recv, peer, 0)
		},
		fill: func() {
			clear(recv)
			for i := range send {
				send[i] = patternByte(me, i)
			}
		},
		wrong: func() (bad int64) {
			// Both ends hold the first rank's bytes.
			from := me
			if !first {
				from = peer
			}
			for i, v := range recv {
				if v != patternByte(from, i) {
					bad++
				}
			}
			return bad
		}}
}
