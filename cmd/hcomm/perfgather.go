package main

import (
	"context"

	"github.com/hcomm-go/hcomm"
)

// Gather and Scatter to and from rank 0, measured like the collectives
// (bytes: the root's whole buffer; busbw factor (n-1)/n, as nccl-tests).
// They are not part of -op all.
func init() {
	benchOps["gather"] = benchOp{setupRooted(true), ringFactor}
	benchOps["scatter"] = benchOp{setupRooted(false), ringFactor}
}

func setupRooted(gather bool) func(*hcomm.Comm, int64, bool, hcomm.DType, hcomm.Op) bench {
	return func(c *hcomm.Comm, size int64, inPlace bool, _ hcomm.DType, _ hcomm.Op) bench {
		n, me := int64(c.Size()), c.Rank()
		per := elemCount(size, 1, c.Size())
		var whole, part []byte // the root's n blocks; this rank's block
		if me == 0 {
			whole = newBytes(c, per*n)
		}
		part = newBytes(c, per)
		if inPlace && me == 0 {
			part = whole[:per]
		}
		b := bench{bytes: per * n, count: per, typ: "uint8", root: 0}
		if gather {
			b.run = func(ctx context.Context) error { return hcomm.Gather(ctx, c, part, whole, 0) }
			b.fill = func() {
				clear(whole)
				for i := range part {
					part[i] = patternByte(me, i)
				}
			}
			b.wrong = func() (w int64) {
				for i, v := range whole {
					if v != patternByte(i/int(per), i%int(per)) {
						w++
					}
				}
				return w
			}
			return b
		}
		b.run = func(ctx context.Context) error { return hcomm.Scatter(ctx, c, whole, part, 0) }
		b.fill = func() {
			if !inPlace || me != 0 {
				clear(part)
			}
			for i := range whole {
				whole[i] = patternByte(i/int(per), i%int(per))
			}
		}
		b.wrong = func() (w int64) {
			for i, v := range part {
				if v != patternByte(me, i) {
					w++
				}
			}
			return w
		}
		return b
	}
}
