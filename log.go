package hcomm

import "github.com/hcomm-go/hcomm/internal/stall"

// Logging: Init's banner and progress lines are internal/boot's (INFO);
// the settings in effect are internal/settings'; the per-collective DEBUG
// line is internal/callpath's. This file holds the slow-peer warning
// (stall.LogSlow).

// logSlow warns that this rank keeps waiting for the ranks in slow, late
// in stall.SlowStreak checked collectives in a row, the last being
// collective seq, called as name. stall.Slow rate-limits it.
func (c *Comm) logSlow(seq uint64, name string, slow []int) {
	stall.LogSlow(c.set.Log, c.id, c.rank, seq, name, slow)
}
