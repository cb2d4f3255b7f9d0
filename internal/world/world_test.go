package world

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/settings"
)

// A job of one rank through a file store: the world knows its one host,
// prices it as shared memory, and needs no link between hosts; with
// HCOMM_TOPOLOGY=off it has no layout; an unreadable topology file is an
// error.
func TestJoin(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	bad := filepath.Join(t.TempDir(), "ranktable.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		topology string
		file     string
		hosts    [][]int
		wantErr  bool
	}{
		{name: "one host", hosts: [][]int{{0}}},
		{name: "topology off", topology: "off"},
		{name: "bad topology file", file: bad, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := settings.Defaults()
			v.Topology, v.RankTable = tt.topology, tt.file
			jc, err := boot.ReadJob(settings.Config{Rank: 0, Size: 1, Store: "file://" + t.TempDir(), Token: "t"}, nil, v, 1<<20, log)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w, err := Join(ctx, jc, v, log)
			if tt.wantErr {
				if err == nil {
					t.Fatal("Join succeeded with an unreadable topology file")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.Job.Close()
			defer w.Transport.Close()
			if !reflect.DeepEqual(w.Hosts, tt.hosts) || w.Inter != nil || w.Model != plan.MemoryModel {
				t.Errorf("hosts %v, inter %v, model %+v; want %v, none, the memory model", w.Hosts, w.Inter, w.Model, tt.hosts)
			}
			p := plan.New(0, 1, w.Model, nil)
			if err := w.Plan(p); err != nil {
				t.Fatal(err)
			}
			if l, ok := p.Layout(); ok != (tt.hosts != nil) || (ok && !reflect.DeepEqual(l.Hosts, tt.hosts)) {
				t.Errorf("planner layout %v, %v; want %v", l.Hosts, ok, tt.hosts)
			}
		})
	}
}
