package hcomm

import (
	"context"
	"log/slog"
)

// Logging: Init's banner and progress lines are internal/boot's (INFO);
// the settings in effect are internal/settings'. This file holds the
// per-collective DEBUG line and the Bucketer's warnings.

// logOp writes a collective's DEBUG line: what runs, on how many bytes,
// and the algorithm the planner chose and why. It is called only when
// c.debug is set (the level is checked once, at newComm), so a
// communicator not logging at DEBUG pays one branch per collective. c.mu
// is held.
func (c *Comm) logOp(k *call, algo string) {
	why := "cheapest under the cost model"
	if algo == groupAlgo {
		why = "small, every rank on this host: slots in the shared segment"
	}
	if name, ok := c.set.overrides[k.coll]; ok {
		if name == algo {
			why = "forced (HCOMM_ALGO / Config.Algo)"
		} else {
			why = "the forced " + name + " cannot serve this call; cheapest under the cost model"
		}
	}
	n := max(len(k.in), len(k.out))
	c.set.log.LogAttrs(context.Background(), slog.LevelDebug, "hcomm: op",
		slog.String("comm", c.id), slog.Int("rank", c.rank), slog.Uint64("seq", c.seq),
		slog.String("op", k.name), slog.String("dtype", k.dt.String()), slog.Int("bytes", n),
		slog.String("algo", algo), slog.String("why", why))
}
