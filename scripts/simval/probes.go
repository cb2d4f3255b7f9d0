package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// probesFile is what measure.sh and measure_tcp.sh (probe.sh) write beside
// their runs: for every run file, a probe of the machine's speed taken just
// before and just after it (a 2-rank shared-memory ring AllReduce of
// 512 KiB, µs a call).
const probesFile = "probes.csv"

// slowFactor separates the machine's two speeds: a probe more than this
// times the set's fastest is of the slow one. On this machine a slow
// period makes a 2-rank shm job 2–3× slower at every size (BENCHMARKS.md),
// the probe about 3× (40 against 120 µs); within one speed idle probes
// spread by well under 1.6×.
const slowFactor = 1.6

// speed is a run file's class by its probes.
type speed int

const (
	fast  speed = iota // both probes within slowFactor of the set's fastest
	slow               // both beyond it
	mixed              // one of each (the speed changed during the run), or a probe failed
)

var speedNames = [...]string{"fast", "slow", "mixed"}

func (s speed) String() string { return speedNames[s] }

// probes is a set's probes: each run file's speed and the fastest probe.
type probes struct {
	ref   float64          // the fastest probe, µs
	class map[string]speed // by run file name
	n     [3]int           // files of each speed
}

// readProbes reads dir's probes.csv; nil, nil when there is none (sets
// measured before the probes).
func readProbes(dir string) (*probes, error) {
	f, err := os.Open(filepath.Join(dir, probesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", probesFile, err)
	}
	type pair struct{ b, a float64 }
	runs := map[string]pair{}
	var all []float64
	for _, r := range rows {
		if len(r) < 3 || r[0] == "file" {
			continue
		}
		b, err1 := strconv.ParseFloat(strings.TrimSpace(r[1]), 64)
		a, err2 := strconv.ParseFloat(strings.TrimSpace(r[2]), 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad row %v", probesFile, r)
		}
		runs[r[0]] = pair{b, a}
		for _, v := range []float64{b, a} {
			if v > 0 {
				all = append(all, v)
			}
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no probe succeeded", probesFile)
	}
	p := &probes{ref: slices.Min(all), class: map[string]speed{}}
	for name, r := range runs {
		c := mixed
		switch lim := slowFactor * p.ref; {
		case r.b <= 0 || r.a <= 0:
		case r.b <= lim && r.a <= lim:
			c = fast
		case r.b > lim && r.a > lim:
			c = slow
		}
		p.class[name] = c
		p.n[c]++
	}
	return p, nil
}

// keep reports whether run file name is of speed want ("all": every
// file). A file without probes (measured before them, or PROBE=0) is
// kept only by "all".
func (p *probes) keep(name, want string) bool {
	if p == nil || want == "all" {
		return true
	}
	c, ok := p.class[name]
	return ok && c.String() == want
}

// describe says how the set's run files divide between the speeds and
// which are used.
func (p *probes) describe(want string) string {
	if p == nil {
		return "no probes (measured before them): every run used"
	}
	use := "every run file"
	if want != "all" {
		use = "the " + want + " runs"
	}
	return fmt.Sprintf("probes (2-rank shm ring AllReduce 512 KiB before and after each run file): fastest %.1f µs; %d files fast (both probes ≤ %.1f×), %d slow, %d mixed or failed; using %s (-mode %s)",
		p.ref, p.n[fast], slowFactor, p.n[slow], p.n[mixed], use, want)
}
