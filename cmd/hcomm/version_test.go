package main

import (
	"context"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "hcomm (unknown version), " + runtime.Version()},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}},
			"hcomm v0.3.0, go1.26.0, " + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abc"},
			{Key: "vcs.time", Value: "2026-11-23T21:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"hcomm (devel), go1.26.0, commit 0123abc of 2026-11-23T21:00:00Z with local changes, " + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "false"}}},
			"hcomm (unknown version), go1.26.0, commit 0123abc, " + platform},
	} {
		if got := versionText(tc.info); got != tc.want {
			t.Errorf("versionText = %q, want %q", got, tc.want)
		}
	}
}

func TestVersionCmd(t *testing.T) {
	var b strings.Builder
	if err := versionCmd(nil, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "hcomm ") || !strings.Contains(b.String(), runtime.Version()) {
		t.Errorf("hcomm version printed %q", b.String())
	}
	if err := versionCmd([]string{"x"}, &b); err == nil {
		t.Error("hcomm version x: no error")
	}
}

// TestHelpSentences checks that no flag's help text stops mid-sentence.
func TestHelpSentences(t *testing.T) {
	for name, usage := range map[string]string{
		"run":   runHelp(),
		"perf":  perfHelp(),
		"store": storeHelp(),
	} {
		for _, l := range strings.Split(usage, "\n") {
			if !strings.HasPrefix(l, "    \t") { // a flag's help, as PrintDefaults writes it
				continue
			}
			l = strings.TrimSpace(l)
			words := strings.Fields(strings.ToLower(l))
			last := words[len(words)-1]
			if strings.HasSuffix(last, "'s") || strings.HasSuffix(last, ",") || strings.HasSuffix(last, ";") ||
				slices.Contains([]string{"the", "a", "an", "of", "to", "and", "or", "with"}, last) {
				t.Errorf("hcomm %s -h: %q stops mid-sentence", name, l)
			}
		}
	}
}

func runHelp() string {
	var b strings.Builder
	parseRunFlags([]string{"-h"}, &b)
	return b.String()
}

func perfHelp() string {
	var b strings.Builder
	parsePerfFlags([]string{"-h"}, &b)
	return b.String()
}

func storeHelp() string {
	var b strings.Builder
	serveStoreCmd(context.Background(), []string{"-h"}, io.Discard, &b)
	return b.String()
}
