package schedtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

func TestGolden(t *testing.T) {
	t.Setenv(UpdateEnv, "")
	dir := t.TempDir()
	file := filepath.Join(dir, "x.golden")

	rec := &recorder{TB: t}
	Golden(rec, file, "a\n")
	if len(rec.msgs) != 1 || !strings.Contains(rec.msgs[0], "-update") {
		t.Errorf("missing file: got %q, want one failure mentioning -update", rec.msgs)
	}

	t.Setenv(UpdateEnv, "1")
	rec = &recorder{TB: t}
	Golden(rec, file, "a\nb\n")
	if len(rec.msgs) != 0 {
		t.Errorf("update failed: %q", rec.msgs)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "a\nb\n" {
		t.Fatalf("file = %q, %v after update", data, err)
	}

	t.Setenv(UpdateEnv, "")
	rec = &recorder{TB: t}
	Golden(rec, file, "a\nb\n")
	if len(rec.msgs) != 0 {
		t.Errorf("equal text failed: %q", rec.msgs)
	}
	Golden(rec, file, "a\nc\n")
	if len(rec.msgs) != 1 || !strings.Contains(rec.msgs[0], "line 2 differs") ||
		!strings.Contains(rec.msgs[0], "got: c") || !strings.Contains(rec.msgs[0], "want: b") {
		t.Errorf("mismatch: got %q", rec.msgs)
	}
}

func TestFirstDiff(t *testing.T) {
	tests := []struct {
		got, want string
		line      int
		g, w      string
	}{
		{"a\nb", "a\nc", 2, "b", "c"},
		{"a", "a\nb", 2, "<end of text>", "b"},
		{"x\n", "y\n", 1, "x", "y"},
		{"a\n", "a", 2, "", "<end of text>"},
	}
	for _, tc := range tests {
		line, g, w := firstDiff(tc.got, tc.want)
		if line != tc.line || g != tc.g || w != tc.w {
			t.Errorf("firstDiff(%q, %q) = %d %q %q, want %d %q %q", tc.got, tc.want, line, g, w, tc.line, tc.g, tc.w)
		}
	}
}
