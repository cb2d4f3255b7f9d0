package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// -replot: drawing rows saved by earlier runs.

// readRows reads rows saved with -csv (or the peer harness's CSV files) or
// -json.
func readRows(r io.Reader) ([]row, error) {
	var rows []row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "impl,") {
			continue
		}
		var x row
		if strings.HasPrefix(t, "{") {
			if err := json.Unmarshal([]byte(t), &x); err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			rows = append(rows, x)
			continue
		}
		f := strings.Split(t, ",")
		if len(f) != 7 {
			return nil, fmt.Errorf("line %d: want 7 comma-separated fields, have %d", line, len(f))
		}
		var errs [5]error
		x.Impl, x.Op = f[0], f[1]
		x.Ranks, errs[0] = strconv.Atoi(f[2])
		x.Bytes, errs[1] = strconv.ParseInt(f[3], 10, 64)
		x.Usec, errs[2] = strconv.ParseFloat(f[4], 64)
		x.AlgBW, errs[3] = strconv.ParseFloat(f[5], 64)
		x.BusBW, errs[4] = strconv.ParseFloat(f[6], 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		rows = append(rows, x)
	}
	return rows, sc.Err()
}

// replot draws -plot from saved rows: those of the ops of -op (every
// collective perf measures when -op was not given) and, when -n was given,
// of that rank count. It says on errOut what it left out.
func replot(pc *perfConfig, errOut io.Writer) error {
	var rows []row
	var skipOps []string
	skipped, skippedRanks := 0, 0
	for _, name := range pc.replot {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rs, err := readRows(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, r := range rs {
			switch {
			case !slices.Contains(pc.ops, r.Op):
				skipped++
				if !slices.Contains(skipOps, r.Op) {
					skipOps = append(skipOps, r.Op)
				}
			case pc.nSet && r.Ranks != pc.n:
				skippedRanks++
			default:
				rows = append(rows, r)
			}
		}
	}
	if skipped > 0 {
		why := "not among -op"
		if !pc.opSet {
			why = "not collectives perf measures"
		}
		fmt.Fprintf(errOut, "hcomm perf: -replot left out %d row(s) of %s (%s)\n", skipped, strings.Join(skipOps, ", "), why)
	}
	if skippedRanks > 0 {
		fmt.Fprintf(errOut, "hcomm perf: -replot left out %d row(s) of other rank counts than -n %d\n", skippedRanks, pc.n)
	}
	if len(rows) == 0 {
		return errors.New("-replot: no rows of the selected ops and ranks")
	}
	return writePlotFile(pc.plot, plotOptions{title: plotTitle(rows, ""), logY: pc.plotLogY}, rows)
}
