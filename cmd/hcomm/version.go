package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version: `hcomm version` says which hcomm this is: the module version
// (a tag such as v0.3.0 for `go install ...@v0.3.0`, "(devel)" for a build
// inside the repository), the Go release that built it, and the commit
// when the build recorded one (builds inside a git checkout do).

// versionCmd prints the version.
func versionCmd(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("version: unexpected argument %q", args[0])
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionText(info))
	return nil
}

// versionText describes the build info (nil: none recorded).
func versionText(info *debug.BuildInfo) string {
	if info == nil {
		return "hcomm (unknown version), " + runtime.Version()
	}
	v := info.Main.Version
	if v == "" {
		v = "(unknown version)"
	}
	parts := []string{"hcomm " + v, info.GoVersion}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		c := "commit " + rev
		if at != "" {
			c += " of " + at
		}
		if modified {
			c += " with local changes"
		}
		parts = append(parts, c)
	}
	parts = append(parts, runtime.GOOS+"/"+runtime.GOARCH)
	return strings.Join(parts, ", ")
}
