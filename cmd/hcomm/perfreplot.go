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

// replot draws -plot from saved rows, keeping the ops of -op and, when -n
// was given, that rank count.
func replot(pc *perfConfig) error {
	var rows []row
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
			if slices.Contains(pc.ops, r.Op) && (!pc.nSet || r.Ranks == pc.n) {
				rows = append(rows, r)
			}
		}
	}
	if len(rows) == 0 {
		return errors.New("-replot: no rows of the selected ops and ranks")
	}
	return writePlotFile(pc.plot, plotTitle(rows), rows)
}
