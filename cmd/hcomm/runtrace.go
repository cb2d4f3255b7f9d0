package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/hcomm-go/hcomm/internal/traceevent"
)

// mergeTrace joins the ranks' trace files when the job ran with
// HCOMM_TRACE (in the launcher's environment or given with -x): each rank
// wrote traceevent.RankFile(pattern, rank), and the launcher writes them
// merged into traceevent.JobFile(pattern), the file to open in Perfetto.
// Files it cannot read here (a rank on a host that does not share this file
// system, or one killed before it finished its file) are left out and
// named.
func (j *job) mergeTrace() {
	pattern := envValue(append(os.Environ(), j.cfg.env...), "HCOMM_TRACE")
	if pattern == "" {
		return
	}
	out := traceevent.JobFile(pattern)
	var files [][]traceevent.Event
	var skipped []string
	for r := range j.places {
		name := traceevent.RankFile(pattern, r)
		evs, err := readTrace(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = errors.New("no such file")
			}
			skipped = append(skipped, fmt.Sprintf("rank %d (%v)", r, err))
			continue
		}
		files = append(files, evs)
	}
	for _, s := range skipped {
		j.logf("trace: left out %s", s)
	}
	if len(files) == 0 {
		return
	}
	merged, _ := traceevent.Merge(files)
	if err := writeTrace(out, merged); err != nil {
		j.logf("trace: %v", err)
		return
	}
	j.logf("trace: %d rank file(s) merged into %s (open it in ui.perfetto.dev)", len(files), out)
}

// writeTrace writes evs to the file name.
func writeTrace(name string, evs []traceevent.Event) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := traceevent.NewWriter(f)
	for _, e := range evs {
		w.Write(e)
	}
	return w.Close()
}
