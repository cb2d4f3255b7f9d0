package hcomm

import (
	"context"
	"log/slog"
	"strings"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// Logging: Init's banner and progress lines are internal/boot's (INFO);
// the settings in effect are internal/settings'. This file holds the
// per-collective DEBUG line and the Bucketer's warnings.

// logOp writes a collective's DEBUG line: what runs, on how many bytes,
// and the algorithm the planner chose and why. It is called only when
// c.debug is set (the level is checked once, at newComm), so a
// communicator not logging at DEBUG pays one branch per collective. c.mu
// is held.
func (c *Comm) logOp(k *call, prog *sched.Program) {
	why := "cheapest under the cost model"
	if name, ok := c.set.overrides[k.coll]; ok {
		if name == prog.Algo {
			why = "forced (HCOMM_ALGO / Config.Algo)"
		} else {
			why = "the forced " + name + " cannot serve this call; cheapest under the cost model"
		}
	}
	n := max(len(k.in), len(k.out))
	c.set.log.LogAttrs(context.Background(), slog.LevelDebug, "hcomm: op",
		slog.String("comm", c.id), slog.Int("rank", c.rank), slog.Uint64("seq", c.seq),
		slog.String("op", k.name), slog.String("dtype", k.dt.String()), slog.Int("bytes", n),
		slog.String("algo", prog.Algo), slog.String("why", why))
}

// unreadyNames bounds the tensor names a bucket warning lists.
const unreadyNames = 4

// logUnready says that bk was launched with missing of its tensors not
// ready (they contribute zeros): at WARN the first time for each bucket,
// at DEBUG after that, so that a parameter unused every step does not
// flood the log. b.mu is held.
func (b *Bucketer) logUnready(bk *bucket, missing int) {
	log := b.c.set.log
	lvl := slog.LevelWarn
	if bk.warned {
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !log.Enabled(ctx, lvl) {
		return
	}
	bk.warned = true
	var names []string
	for _, g := range bk.members {
		if !g.ready && len(names) < unreadyNames {
			names = append(names, g.name)
		}
	}
	if missing > len(names) {
		names = append(names, "…")
	}
	why := "its window expired"
	if b.flushing {
		why = "Flush or Wait"
	}
	msg := "hcomm: bucket launched with tensors not ready; they contribute zeros"
	if lvl == slog.LevelWarn {
		msg += " (later launches of this bucket like this one are logged at DEBUG)"
	}
	log.LogAttrs(ctx, lvl, msg, slog.Int("rank", b.c.rank), slog.Int("bucket", bk.index),
		slog.Int("not_ready", missing), slog.Int("tensors", len(bk.members)),
		slog.String("names", strings.Join(names, ", ")), slog.String("by", why))
}
