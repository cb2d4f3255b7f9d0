package hcomm_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/fusion"
	"github.com/hcomm-go/hcomm/internal/traceevent"
)

// TestTraceFile: a 4-rank job run with HCOMM_TRACE leaves one
// trace-event file per rank that passes the format's checks and holds
// every collective of that rank, with its description; the files merge.
func TestTraceFile(t *testing.T) {
	const n = 4
	dir := t.TempDir()
	t.Setenv("HCOMM_TRACE", filepath.Join(dir, "job.json"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := "file://" + t.TempDir()
	var seen sync.Map // the program's own hcomm.Observer still sees every call
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obs := &hcomm.Observer{OpEnd: func(e hcomm.OpEvent) { seen.Store(strconv.Itoa(e.Rank)+"/"+strconv.FormatUint(e.Seq, 10), true) }}
			c, err := hcomm.Init(ctx, &hcomm.Config{Rank: r, Size: n, Store: st, Token: "t", Observer: obs})
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			x := make([]float32, 256)
			for range 3 {
				if err := hcomm.AllReduce(ctx, c, x, x, hcomm.Sum); err != nil {
					errs[r] = err
					return
				}
			}
			if errs[r] = hcomm.Broadcast(ctx, c, x, 0); errs[r] != nil {
				return
			}
			b := fusion.NewBucketer(c, fusion.Config{})
			defer b.Close()
			g, _ := fusion.Register(b, "g", make([]float32, 4))
			if errs[r] = b.Build(ctx); errs[r] != nil {
				return
			}
			if errs[r] = g.Ready(); errs[r] != nil {
				return
			}
			errs[r] = b.Wait(ctx)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	var files [][]traceevent.Event
	for r := range n {
		f, err := os.Open(filepath.Join(dir, "job.rank"+strconv.Itoa(r)+".json"))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := traceevent.Read(f)
		f.Close()
		if err != nil {
			t.Fatalf("rank %d's file: %v", r, err)
		}
		files = append(files, evs)
		var ops []string
		buckets := 0
		for _, e := range evs {
			if e.Ph == "i" && e.Cat == "bucket" && e.Name == "bucket 0" && e.Args["tensors"] == float64(1) {
				buckets++
			}
			if e.Ph != "X" || e.Args["seq"] != float64(len(ops)+1) || len(ops) == 4 { // then the Bucketer's own
				continue
			}
			if e.PID != r || e.Cat != "collective" || e.Args["algo"] == "" || e.Args["comm"] != "world" || e.Args["bytes"] != float64(1024) ||
				!(e.Args["chunks"].(float64) >= 1 || e.Args["algo"] == "shm-slots") || !(e.Args["wait_us"].(float64) >= 0) {
				t.Errorf("rank %d: slice %+v", r, e)
			}
			ops = append(ops, e.Name)
		}
		if want := []string{"AllReduce", "AllReduce", "AllReduce", "Broadcast"}; len(ops) != 4 || ops[0] != want[0] || ops[3] != want[3] {
			t.Errorf("rank %d's slices %v, want %v", r, ops, want)
		}
		if buckets != 1 {
			t.Errorf("rank %d's file has %d bucket launches, want 1", r, buckets)
		}
	}
	for r := range n {
		for s := 1; s <= 4; s++ {
			if _, ok := seen.Load(strconv.Itoa(r) + "/" + strconv.Itoa(s)); !ok {
				t.Errorf("the program's hcomm.Observer missed rank %d's collective %d", r, s)
			}
		}
	}
	merged, renumbered := traceevent.Merge(files)
	if renumbered != 0 || len(merged) == 0 {
		t.Errorf("merge: %d events, %d files renumbered", len(merged), renumbered)
	}
}
