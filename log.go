package hcomm

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/stall"
)

// Logging: Init's banner and progress lines are internal/boot's (INFO);
// the settings in effect are internal/settings'. This file holds the
// per-collective DEBUG line and the slow-peer warning.

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
	n := max(len(k.In), len(k.Out))
	c.set.log.LogAttrs(context.Background(), slog.LevelDebug, "hcomm: op",
		slog.String("comm", c.id), slog.Int("rank", c.rank), slog.Uint64("seq", c.seq),
		slog.String("op", k.name), slog.String("dtype", k.DT.String()), slog.Int("bytes", n),
		slog.String("algo", algo), slog.String("why", why))
}

// logSlow warns that this rank keeps waiting for the ranks in slow: each
// was still missing from stall.SlowStreak collectives in a row when the
// stall check looked (stall.First after they started), the last being
// collective seq, called as name. stall.Slow rate-limits it.
func (c *Comm) logSlow(seq uint64, name string, slow []int) {
	c.set.log.LogAttrs(context.Background(), slog.LevelWarn,
		"hcomm: slow peer: this rank keeps waiting for "+diag.RankList(slow)+
			" (not yet in "+strconv.Itoa(stall.SlowStreak)+" collectives in a row "+stall.First.String()+
			" after this rank entered them); check its host's load, CPU throttling or link",
		slog.String("comm", c.id), slog.Int("rank", c.rank), slog.String("peers", diag.RankList(slow)),
		slog.Uint64("seq", seq), slog.String("op", name))
}
