package main

import (
	"bytes"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestCopyLines(t *testing.T) {
	long := strings.Repeat("y", maxLineBytes+10)
	for _, tc := range []struct {
		name, in, prefix, want string
	}{
		{"empty", "", "[1] ", ""},
		{"lines", "a\nb\n", "[1] ", "[1] a\n[1] b\n"},
		{"partial", "a\nb", "[1] ", "[1] a\n[1] b\n"},
		{"blank lines", "\n\n", "[0] ", "[0] \n[0] \n"},
		{"untagged", "a\nb", "", "a\nb"},
		{"long tagged", long + "\n", "[2] ", "[2] " + long[:maxLineBytes] + "\n[2] " + long[maxLineBytes:] + "\n"},
		{"long untagged", long, "", long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r },
				iotest.OneByteReader,
				iotest.HalfReader,
			} {
				var out bytes.Buffer
				copyLines(&out, r(strings.NewReader(tc.in)), tc.prefix)
				if out.String() != tc.want {
					t.Fatalf("got %q, want %q", trim(out.String()), trim(tc.want))
				}
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:40] + "..." + s[len(s)-40:]
	}
	return s
}

// writeRecorder records each Write separately.
type writeRecorder struct{ writes []string }

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func FuzzCopyLines(f *testing.F) {
	f.Add([]byte("a\nb\nc"), true)
	f.Add([]byte("\n\n\n"), false)
	f.Fuzz(func(t *testing.T, in []byte, tagged bool) {
		prefix := ""
		if tagged {
			prefix = "[7] "
		}
		var w writeRecorder
		copyLines(&w, iotest.HalfReader(bytes.NewReader(in)), prefix)
		// Every write is one whole line with its prefix; the writes
		// together are the input, prefixed, with a final newline when
		// tagged.
		var body []byte
		for i, s := range w.writes {
			line, ok := strings.CutPrefix(s, prefix)
			if !ok {
				t.Fatalf("write %q lacks the prefix", s)
			}
			if nl := strings.IndexByte(line, '\n'); nl >= 0 && nl != len(line)-1 {
				t.Fatalf("write %q holds more than one line", s)
			}
			if tagged && !strings.HasSuffix(line, "\n") {
				t.Fatalf("tagged write %q does not end a line", s)
			}
			if !tagged && i < len(w.writes)-1 && !strings.HasSuffix(line, "\n") {
				t.Fatalf("untagged write %q ends mid-line", s)
			}
			body = append(body, line...)
		}
		want := in
		if tagged && len(in) > 0 && in[len(in)-1] != '\n' {
			want = append(slices.Clip(in), '\n')
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("copied %q, want %q", body, want)
		}
	})
}

func TestReportLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n\n", nil},
		{"peer 2 lost", []string{"peer 2 lost"}},
		{"a\r\nb\n", []string{"a", "b"}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"tab\there \x1b[2Jclear\x00", []string{"tab\there ?[2Jclear?"}},
		{"bad \xff utf8", []string{"bad \uFFFD utf8"}},
		{strings.Repeat("z", 5000), []string{strings.Repeat("z", 4096), "... (truncated)"}},
	} {
		if got := reportLines([]byte(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("reportLines(%q) = %q, want %q", trim(tc.in), got, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	words := []string{
		"plain", "HCOMM_STORE=tcp://10.0.0.1:29500", "/abs/path-1.2", "", " ", "two words",
		"it's", `"double"`, "$HOME", "`date`", "a*b?[c]", "~user", "semi;colon", "back\\slash",
		"new\nline", "tab\tbed", "'", "''", "-n", "!bang", "ünïcode", "a=$(x)",
	}
	for _, w := range []string{"plain", "HCOMM_STORE=tcp://10.0.0.1:29500", "/abs/path-1.2"} {
		if q := shellQuote(w); q != w {
			t.Errorf("shellQuote(%q) = %q, want it unchanged", w, q)
		}
	}
	// sh must turn the quoted words back into the originals.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	out, err := exec.Command(sh, "-c", `for a in `+strings.Join(quoted, " ")+`; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, words) {
		t.Errorf("sh read back %q, want %q", got, words)
	}
}

func FuzzShellQuote(f *testing.F) {
	f.Add("it's")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		q := shellQuote(s)
		if q == s {
			if s == "" || strings.ContainsAny(s, " \t\n'\"\\$`*?[]~;&|<>(){}#!") {
				t.Fatalf("%q left unquoted", s)
			}
			return
		}
		// Single-quoted pieces joined by \' : undo that and compare.
		inner, ok := strings.CutPrefix(q, "'")
		if inner, ok = strings.CutSuffix(inner, "'"); !ok || len(q) < 2 {
			t.Fatalf("%q: quoted form %q not in single quotes", s, q)
		}
		parts := strings.Split(inner, `'\''`)
		for _, p := range parts {
			if strings.Contains(p, "'") {
				t.Fatalf("%q: stray quote in %q", s, q)
			}
		}
		if strings.Join(parts, "'") != s {
			t.Fatalf("%q: quoted form %q does not decode back", s, q)
		}
	})
}

func TestRemoteArgv(t *testing.T) {
	got := remoteArgv([]string{"ssh", "-p", "2222"}, "node1", []string{"HCOMM_RANK=3", "X=a b"}, "/bin/prog", []string{"--flag", "it's"})
	want := []string{"ssh", "-p", "2222", "node1", "IFS=", "read", "-r", "HCOMM_TOKEN", "&&", "export", "HCOMM_TOKEN", "&&",
		"exec", "env", "HCOMM_RANK=3", "'X=a b'", "/bin/prog", "--flag", `'it'\''s'`, "</dev/null"}
	if !slices.Equal(got, want) {
		t.Errorf("remoteArgv = %q, want %q", got, want)
	}
}
