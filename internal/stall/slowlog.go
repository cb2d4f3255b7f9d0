package stall

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/hcomm-go/hcomm/internal/diag"
)

// LogSlow warns on log that rank rank of communicator comm keeps waiting
// for the ranks in slow (as Slow.Note returned them): each was still
// missing from SlowStreak collectives in a row when the check looked
// (First after they started), the last being collective seq, called as op.
func LogSlow(log *slog.Logger, comm string, rank int, seq uint64, op string, slow []int) {
	log.LogAttrs(context.Background(), slog.LevelWarn,
		"hcomm: slow peer: this rank keeps waiting for "+diag.RankList(slow)+
			" (not yet in "+strconv.Itoa(SlowStreak)+" collectives in a row "+First.String()+
			" after this rank entered them); check its host's load, CPU throttling or link",
		slog.String("comm", comm), slog.Int("rank", rank), slog.String("peers", diag.RankList(slow)),
		slog.Uint64("seq", seq), slog.String("op", op))
}
