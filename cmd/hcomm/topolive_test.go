package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/store"
)

// TestLivePathsMissing: `hcomm topo -live` awaits each rank's answer on its
// own: a rank that does not answer is printed as such, the ranks after it
// are still listed with their paths, and the command fails naming it;
// running out of time while listing the ranks is told apart from the end
// of the job's ranks.
func TestLivePathsMissing(t *testing.T) {
	tests := []struct {
		name     string
		cards    int
		answer   []int // ranks with a state answer ready
		budget   liveBudget
		want     []string // in the output
		wantErr  string   // "" for success
		notInOut string
	}{
		{"all answer", 2, []int{0, 1}, liveBudget{all: 5 * time.Second, card: 200 * time.Millisecond},
			[]string{"rank 0 (pid 100):", "rank 1 (pid 101):", "peer 0 path 0"}, "", "no answer"},
		{"a silent rank", 3, []int{0, 2}, liveBudget{all: 2 * time.Second, card: 200 * time.Millisecond},
			[]string{"rank 0 (pid 100):", "rank 1: no answer within 2s", "rank 2 (pid 102):"},
			"1 of 3 ranks did not answer within 2s: ranks 1", ""},
		{"time runs out listing the ranks", 2, []int{0, 1}, liveBudget{all: 300 * time.Millisecond, card: time.Hour},
			[]string{"ranks from 2 on: not listed"}, "found the address cards of 2 ranks within 300ms, and the job may have more", ""},
		{"no rank", 0, nil, liveBudget{all: 5 * time.Second, card: 100 * time.Millisecond},
			nil, "no rank of a job has joined", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fs, err := store.NewFileStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			ctx := context.Background()
			for r := range tt.cards {
				if err := fs.Set(ctx, fmt.Sprintf(cardKeyFmt, r), []byte("card")); err != nil {
					t.Fatal(err)
				}
			}
			// The first dump request of a fresh store is number 1.
			for _, r := range tt.answer {
				ps := diag.ProcState{World: r, PID: 100 + r, Comms: []diag.CommState{{Comm: "world", Rank: r,
					Paths: []string{fmt.Sprintf("peer %d path 0 a->b up", 1-r)}}}}
				v, err := json.Marshal(ps)
				if err != nil {
					t.Fatal(err)
				}
				if err := fs.Set(ctx, diag.StateKey(1, r), v); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			err = livePathsIn(ctx, &out, "file://"+dir, "", tt.budget)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("%v\noutput:\n%s", err, out.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one saying %q\noutput:\n%s", err, tt.wantErr, out.String())
			}
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the output lacks %q:\n%s", want, out.String())
				}
			}
			if tt.notInOut != "" && strings.Contains(out.String(), tt.notInOut) {
				t.Errorf("the output says %q:\n%s", tt.notInOut, out.String())
			}
		})
	}
}
