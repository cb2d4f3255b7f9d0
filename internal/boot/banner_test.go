package boot

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

func TestTopologySummary(t *testing.T) {
	for _, tc := range []struct {
		hosts [][]int
		want  string
	}{
		{nil, "not exchanged"},
		{[][]int{{0, 1}, {2, 3}}, "2 hosts × 2 ranks"},
		{[][]int{{0}, {1, 2, 3}, {4, 5}}, "3 hosts, 1-3 ranks each"},
	} {
		if got := topologySummary(tc.hosts); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.hosts, got, tc.want)
		}
	}
}

func TestModuleVersion(t *testing.T) {
	for _, tc := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, "(devel)"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: []*debug.Module{{Path: ModulePath, Version: "v0.3.0"}}}, "v0.3.0"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: []*debug.Module{{Path: ModulePath, Version: "v0.3.0", Replace: &debug.Module{Path: "../hcomm"}}}}, "v0.3.0 => ../hcomm"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, "unknown"},
	} {
		if got := moduleVersion(&tc.info); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.info.Main, got, tc.want)
		}
	}
}

func TestBanner(t *testing.T) {
	var b bytes.Buffer
	jc := JobConfig{Rank: 1, Size: 4, Launcher: "Slurm", LocalRank: 1, Options: Options{Host: "node7"}}
	Banner(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelWarn})), jc, nil, nil)
	if b.Len() != 0 {
		t.Errorf("banner at WARN: %s", b.String())
	}
	Banner(slog.New(slog.NewTextHandler(&b, nil)), jc, &Job{peers: "shm 1 peers, tcp 2 peers on 1 hosts"}, [][]int{{0, 1}, {2, 3}})
	for _, want := range []string{`msg="hcomm: joined"`, "rank=1 size=4 local_rank=1 launcher=Slurm host=node7",
		`transports="shm 1 peers, tcp 2 peers on 1 hosts"`, `topology="2 hosts × 2 ranks"`, "version="} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("banner %q lacks %q", b.String(), want)
		}
	}
}
