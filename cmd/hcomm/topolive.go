package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/store"
)

// liveWait bounds how long `hcomm topo -live` waits for the ranks'
// answers, and liveCardWait how long it looks for a rank's address card
// (the first rank without one ends the world).
const (
	liveWait     = 10 * time.Second
	liveCardWait = time.Second
)

// liveBudget is how long livePaths waits: for everything, and for one
// rank's address card.
type liveBudget struct {
	all, card time.Duration
}

// livePaths prints the network paths of every communicator of the running
// job whose store is at url: it asks every process for its state with the
// dump protocol (as the launcher does before it stops a job, see
// runstate.go), whose answers carry each communicator's paths, a line per
// path with its bytes, weight, state, RTT and retransmits. The ranks are
// those with an address card, 0 up to the first without; each rank's
// answer is awaited on its own, so that one that does not answer does not
// hide the others. Ranks that did not answer, or could not be listed in
// time, are printed as such and make it fail.
func livePaths(ctx context.Context, w io.Writer, url, token string) error {
	return livePathsIn(ctx, w, url, token, liveBudget{all: liveWait, card: liveCardWait})
}

func livePathsIn(ctx context.Context, w io.Writer, url, token string, b liveBudget) error {
	ctx, cancel := context.WithTimeout(ctx, b.all)
	defer cancel()
	st, err := store.Open(ctx, url, token)
	if err != nil {
		return fmt.Errorf("topo: store: %w", err)
	}
	defer st.Close()
	k, err := st.Add(ctx, diag.DumpSeqKey, 1)
	if err != nil {
		return fmt.Errorf("topo: store: %w", err)
	}
	if err := st.Set(ctx, diag.DumpKey(k), []byte{1}); err != nil {
		return fmt.Errorf("topo: store: %w", err)
	}
	// Each rank's answer is awaited as soon as its card is found, while
	// the next card is looked for.
	type answer struct {
		ps  *diag.ProcState
		why string // when ps is nil
	}
	var answers []chan answer
	sem := make(chan struct{}, 256)
	listed := true // every card up to the first missing one was seen
	var storeErr error
cards:
	for r := 0; ; r++ {
		cctx, ccancel := context.WithTimeout(ctx, b.card)
		_, err := st.Get(cctx, fmt.Sprintf(cardKeyFmt, r))
		timedOut := cctx.Err() != nil
		ccancel()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				listed = false // the budget ran out, not a missing card
			case !timedOut:
				listed, storeErr = false, err
			}
			break cards // otherwise the world's ranks are 0 to r-1
		}
		a := make(chan answer, 1)
		answers = append(answers, a)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			v, err := st.Get(ctx, diag.StateKey(k, r))
			var ps diag.ProcState
			switch {
			case err != nil && ctx.Err() != nil:
				a <- answer{why: fmt.Sprintf("no answer within %v (still in Init, hung, or cut off from the store)", b.all)}
			case err != nil:
				a <- answer{why: fmt.Sprintf("no answer: %v", err)}
			case len(v) > maxStateBytes || json.Unmarshal(v, &ps) != nil:
				a <- answer{why: fmt.Sprintf("an answer of %d bytes that is not a process state", len(v))}
			default:
				a <- answer{ps: &ps}
			}
		}()
	}
	var silent []int
	for r, a := range answers {
		ans := <-a
		if ans.ps == nil {
			fmt.Fprintf(w, "rank %d: %s\n", r, ans.why)
			silent = append(silent, r)
			continue
		}
		fmt.Fprintf(w, "rank %d (pid %d):\n", r, ans.ps.PID)
		for _, cs := range ans.ps.Comms {
			if len(cs.Paths) == 0 {
				fmt.Fprintf(w, "  comm %s rank %d: no network paths\n", cs.Comm, cs.Rank)
				continue
			}
			fmt.Fprintf(w, "  comm %s rank %d:\n", cs.Comm, cs.Rank)
			for _, l := range cs.Paths {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
	}
	n := len(answers)
	switch {
	case storeErr != nil:
		return fmt.Errorf("topo: store, looking for rank %d's address card: %w", n, storeErr)
	case !listed:
		fmt.Fprintf(w, "ranks from %d on: not listed, the store did not answer within %v\n", n, b.all)
		return fmt.Errorf("topo: found the address cards of %d ranks within %v, and the job may have more; %d of them did not answer",
			n, b.all, len(silent))
	case n == 0:
		return fmt.Errorf("topo: no rank of a job has joined at %s", store.Redact(url))
	case len(silent) > 0:
		return fmt.Errorf("topo: %d of %d ranks did not answer within %v: ranks %s", len(silent), n, b.all, rankList(silent))
	}
	return nil
}

// rankList writes ranks as "1, 4, 7", cut after the first 16.
func rankList(ranks []int) string {
	var sb strings.Builder
	for i, r := range ranks {
		if i == 16 {
			fmt.Fprintf(&sb, " and %d more", len(ranks)-i)
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(r))
	}
	return sb.String()
}
