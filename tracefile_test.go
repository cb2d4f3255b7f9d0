package hcomm

import "testing"

func TestTraceFileName(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		rank    int
		want    string
	}{
		{"job.json", 3, "job.rank3.json"},
		{"/tmp/t/job.json", 0, "/tmp/t/job.rank0.json"},
		{"trace", 1, "trace.rank1"},
		{"/tmp/r%r/t.json", 2, "/tmp/r2/t.json"},
	} {
		if got := traceFileName(tc.pattern, tc.rank); got != tc.want {
			t.Errorf("traceFileName(%q, %d) = %q, want %q", tc.pattern, tc.rank, got, tc.want)
		}
	}
}
