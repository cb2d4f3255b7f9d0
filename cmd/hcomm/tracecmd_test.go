package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/traceevent"
)

func TestTraceMergeCheck(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	var names []string
	for r := range 4 {
		name := filepath.Join(dir, "rank"+string(rune('0'+r))+".json")
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w := traceevent.NewWriter(f)
		w.Process(r, "rank")
		w.Thread(r, 0, "collectives")
		w.Slice(r, 0, "AllReduce", "collective", base.Add(time.Duration(r)*time.Microsecond), time.Millisecond, map[string]any{"algo": "ring"})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	out := filepath.Join(dir, "job.json")
	var so, se bytes.Buffer
	if err := traceCmd(append([]string{"merge", "-o", out}, names...), &so, &se); err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	so.Reset()
	if err := traceCmd([]string{"check", out}, &so, &se); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(so.String(), "ok, 20 events, 4 slices, 4 processes, 4 tracks") {
		t.Errorf("check: %s", so.String())
	}
	// To standard output, and a rank repeated.
	so.Reset()
	se.Reset()
	if err := traceCmd([]string{"merge", names[0], names[0]}, &so, &se); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(se.String(), "renumbered") || !strings.HasPrefix(so.String(), `{"displayTimeUnit"`) {
		t.Errorf("stderr %q, stdout %.60q", se.String(), so.String())
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"name":"x","ph":"X","ts":1}]`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"split"}, "unknown subcommand"},
		{[]string{"merge"}, "no input files"},
		{[]string{"merge", bad}, `without "dur"`},
		{[]string{"merge", filepath.Join(dir, "none.json")}, "no such file"},
		{[]string{"check"}, "no files"},
		{[]string{"check", out, bad}, "invalid file"},
	} {
		so.Reset()
		err := traceCmd(c.args, &so, &se)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}
