//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadTopologyInit starts 4 ranks of the rank helper on hosts a and b
// (2 each, through an rsh that runs them here, so that they share this
// machine but not their host identity) with a topology file (or a data
// interface) that is wrong in one way, and checks that hcomm.Init fails on every rank with the
// file's error, on its own: the report window is long, so a rank that hung
// instead would be stopped by the launcher and print nothing.
func TestBadTopologyInit(t *testing.T) {
	dir := t.TempDir()
	rsh := filepath.Join(dir, "rsh")
	if err := os.WriteFile(rsh, []byte("#!/bin/sh\nshift\nexec sh -c \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file string
		// x are more variables for every rank; rank3 a file that rank 3
		// reads instead ("-" for none that exists), and want3 its error
		// when it differs from the others'.
		x           []string
		rank3       string
		want, want3 string
	}{
		{name: "unknown host", file: "host a ranks 0-1\nhost c ranks 2-3\n", want: "host c is not a host of this job"},
		{name: "rank on another host", file: "host a ranks 0,2\nhost b ranks 1,3\n", want: "rank 2 is placed on host a but runs on b"},
		{name: "duplicate rank", file: "host a ranks 0-1\nhost b ranks 1-3\n", want: "rank 1 is listed twice"},
		{name: "more ranks than the job", file: "host a ranks 0-1,4\nhost b ranks 2-3,5\n", want: "host a lists rank 4 but the job has 4 ranks"},
		{name: "fewer ranks than the job", file: "host a ranks 0-1\nhost b ranks 2\n", want: "missing ranks 3"},
		{name: "rank table of another size", file: `{"version": "1.0", "server_count": "2", "server_list": [
			{"server_id": "a", "device": [{"rank_id": "0"}, {"rank_id": "1"}]},
			{"server_id": "b", "device": [{"rank_id": "2"}]}]}`, want: "missing ranks 3"},
		{name: "unknown NIC", file: "host a ranks 0-1 nic nosuch0\nhost b ranks 2-3\n", want: `names NIC "nosuch0"`},
		{name: "ranks read different files", file: "host a ranks 0-1\nhost b ranks 2-3\n",
			rank3: "host a ranks 0-1\nhost b ranks 2-3\n\n", want: "read different topology files"},
		{name: "one rank cannot read the file", file: "host a ranks 0-1\nhost b ranks 2-3\n",
			rank3: "-", want: "ranks 0 and 3 read different topology files", want3: "no such file or directory (HCOMM_RANK_TABLE)"},
		{name: "no such data interface", file: "host a ranks 0-1\nhost b ranks 2-3\n",
			x: []string{"HCOMM_SOCKET_IFNAME==nosuch0"}, want: `HCOMM_SOCKET_IFNAME="=nosuch0" matches no up interface`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "job.topo")
			if err := os.WriteFile(file, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"--hosts", "a:2,b:2", "--rsh", rsh, "--store-addr", "127.0.0.1:0", "--tag-output",
				"--report-window", "3m", "--timeout", "4m", "-x", "HCOMM_RANK_TABLE=" + file}
			for _, x := range tt.x {
				args = append(args, "-x", x)
			}
			actions := []string{"init"}
			if tt.rank3 != "" {
				other := filepath.Join(t.TempDir(), "other.topo")
				if tt.rank3 == "-" {
					other = filepath.Join(t.TempDir(), "missing.topo")
				} else if err := os.WriteFile(other, []byte(tt.rank3), 0o644); err != nil {
					t.Fatal(err)
				}
				actions = []string{"rank3:setenv=HCOMM_RANK_TABLE=" + other, "init"}
			}
			code, stdout, stderr := launch(t, append(append(args, "--", helperBin), actions...)...)
			if code == 0 {
				t.Fatalf("the job passed:\n%s", stdout)
			}
			for r := range 4 {
				if line := fmt.Sprintf("[%d] rankhelper %d: init: ", r, r); !strings.Contains(stderr, line) {
					t.Errorf("rank %d did not fail Init by itself; stderr:\n%s", r, stderr)
				}
			}
			for _, l := range strings.Split(stderr, "\n") {
				if !strings.Contains(l, "rankhelper") || !strings.Contains(l, ": init: ") {
					continue
				}
				want := tt.want
				if tt.want3 != "" && strings.HasPrefix(l, "[3] ") {
					want = tt.want3
				}
				if !strings.Contains(l, want) {
					t.Errorf("Init failed without saying %q: %s", want, l)
				}
			}
		})
	}
}
