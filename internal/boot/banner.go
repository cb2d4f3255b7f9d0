package boot

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
)

// ModulePath is the library's module path, as build info records it.
const ModulePath = "github.com/hcomm-go/hcomm"

// Version is the library's module version as the program's build info
// records it: a tag such as v0.3.0, "(devel)" when the program is built
// inside the repository, or "unknown".
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return moduleVersion(info)
}

func moduleVersion(info *debug.BuildInfo) string {
	if info.Main.Path == ModulePath && info.Main.Version != "" {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == ModulePath {
			if d.Replace != nil {
				return d.Version + " => " + d.Replace.Path
			}
			return d.Version
		}
	}
	return "unknown"
}

// Banner logs, at INFO, what a rank joined: its place in the job, its
// host, which transport reaches which peers (j nil: none), the host
// layout (hosts nil: not known) and the library's version.
func Banner(log *slog.Logger, jc JobConfig, j *Job, hosts [][]int) {
	if !log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	attrs := []any{"rank", jc.Rank, "size", jc.Size}
	if jc.LocalRank >= 0 {
		attrs = append(attrs, "local_rank", jc.LocalRank)
	}
	if jc.Launcher != "" {
		attrs = append(attrs, "launcher", jc.Launcher)
	}
	peers := "none"
	if j != nil {
		peers = j.Peers()
	}
	attrs = append(attrs, "host", jc.Options.Host, "transports", peers, "topology", topologySummary(hosts), "version", Version())
	log.Info("hcomm: joined", attrs...)
}

// topologySummary describes a host layout: "2 hosts × 4 ranks" or
// "3 hosts, 1-4 ranks each".
func topologySummary(hosts [][]int) string {
	if len(hosts) == 0 {
		return "not exchanged"
	}
	sizes := make([]int, len(hosts))
	for i, h := range hosts {
		sizes[i] = len(h)
	}
	lo, hi := slices.Min(sizes), slices.Max(sizes)
	if lo == hi {
		return fmt.Sprintf("%d hosts × %d ranks", len(hosts), lo)
	}
	return fmt.Sprintf("%d hosts, %d-%d ranks each", len(hosts), lo, hi)
}
