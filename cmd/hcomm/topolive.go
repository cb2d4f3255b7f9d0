package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// livePaths prints the network paths of every communicator of the running
// job whose store is at url: it asks every process for its state with the
// dump protocol (as the launcher does before it stops a job, see
// runstate.go), whose answers carry each communicator's paths, a line per
// path with its bytes, weight, state, RTT and retransmits.
func livePaths(ctx context.Context, w io.Writer, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, liveWait)
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
	ranks := 0
	for r := 0; ; r++ {
		cctx, ccancel := context.WithTimeout(ctx, liveCardWait)
		_, err := st.Get(cctx, fmt.Sprintf(cardKeyFmt, r))
		ccancel()
		if err != nil {
			break // the world's ranks are 0 to r-1
		}
		ranks++
		v, err := st.Get(ctx, diag.StateKey(k, r))
		var ps diag.ProcState
		if err != nil || len(v) > maxStateBytes || json.Unmarshal(v, &ps) != nil {
			fmt.Fprintf(w, "rank %d: no answer\n", r)
			continue
		}
		fmt.Fprintf(w, "rank %d (pid %d):\n", r, ps.PID)
		for _, cs := range ps.Comms {
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
	if ranks == 0 {
		return fmt.Errorf("topo: no rank of a job has joined at %s", store.Redact(url))
	}
	return nil
}
