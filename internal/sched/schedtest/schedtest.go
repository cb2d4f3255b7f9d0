// Package schedtest holds test helpers for packages that build schedules:
// golden-file comparison of printed programs.
//
// Importing it defines the test flag -update; a test binary that imports it
// must not define a flag of that name itself.
package schedtest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update is set by running the tests with -update.
var update = flag.Bool("update", false, "rewrite golden files with the output of the tests")

// UpdateEnv is the environment variable that, set to 1, rewrites golden files
// like the -update flag does.
const UpdateEnv = "HCOMM_UPDATE_GOLDEN"

// Updating reports whether golden files are being rewritten: the test binary
// runs with -update or with HCOMM_UPDATE_GOLDEN=1.
func Updating() bool { return *update || os.Getenv(UpdateEnv) == "1" }

// Golden compares got with the contents of file. When Updating, it writes got
// to file instead (creating its directory). A mismatch fails the test with
// the first line that differs.
func Golden(t testing.TB, file, got string) {
	t.Helper()
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
			return
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
		return
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("golden: %v (run the tests with -update or %s=1 to create it)", err, UpdateEnv)
		return
	}
	want := string(data)
	if got == want {
		return
	}
	line, g, w := firstDiff(got, want)
	t.Errorf("golden %s: line %d differs:\n got: %s\nwant: %s\n(run the tests with -update or %s=1 to accept the new output)",
		file, line, g, w, UpdateEnv)
}

// firstDiff returns the 1-based number of the first line where got and want
// differ, and those lines (or "<end of text>").
func firstDiff(got, want string) (line int, g, w string) {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; ; i++ {
		g, w = "<end of text>", "<end of text>"
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if i >= len(gl) || i >= len(wl) || g != w {
			return i + 1, g, w
		}
	}
}
