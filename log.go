package hcomm

import (
	"context"
	"log/slog"

	"github.com/hcomm-go/hcomm/internal/stall"
)

// Logging: Init's banner and progress lines are internal/boot's (INFO);
// the settings in effect are internal/settings'. This file holds the
// per-collective DEBUG line and the slow-peer warning (stall.LogSlow).

// logOp writes a collective's DEBUG line: what runs, on how many bytes,
// and the algorithm the planner chose and why (plan.Overrides.Why). It is
// called only when c.debug is set (the level is checked once, at newComm),
// so a communicator not logging at DEBUG pays one branch per collective.
// c.mu is held.
func (c *Comm) logOp(k *call, algo string) {
	c.set.log.LogAttrs(context.Background(), slog.LevelDebug, "hcomm: op",
		slog.String("comm", c.id), slog.Int("rank", c.rank), slog.Uint64("seq", c.seq),
		slog.String("op", k.name), slog.String("dtype", k.DT.String()), slog.Int("bytes", max(len(k.In), len(k.Out))),
		slog.String("algo", algo), slog.String("why", c.set.overrides.Why(k.coll, algo, algo == groupAlgo)))
}

// logSlow warns that this rank keeps waiting for the ranks in slow, late
// in stall.SlowStreak checked collectives in a row, the last being
// collective seq, called as name. stall.Slow rate-limits it.
func (c *Comm) logSlow(seq uint64, name string, slow []int) {
	stall.LogSlow(c.set.log, c.id, c.rank, seq, name, slow)
}
