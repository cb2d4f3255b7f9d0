package main

import (
	"bufio"
	"io"
	"strings"
	"sync"
)

// maxLineBytes is the longest line the launcher passes on in one piece;
// longer lines are cut, and with --tag-output each piece gets its own tag.
const maxLineBytes = 64 << 10

// syncWriter serializes writes to w, so that each Write reaches w whole,
// never mixed with another goroutine's. Errors are dropped: a launcher
// whose output is gone must still drain its ranks' pipes.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(p)
	return len(p), nil
}

// copyLines copies src to dst a line at a time, each line in one Write, so
// that lines of different ranks never interleave. A non-empty prefix is put
// before every line, and a last line without a newline gets one; without a
// prefix the bytes pass through unchanged.
func copyLines(dst io.Writer, src io.Reader, prefix string) {
	br := bufio.NewReaderSize(src, maxLineBytes)
	buf := make([]byte, 0, 256)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			buf = append(append(buf[:0], prefix...), line...)
			if prefix != "" && line[len(line)-1] != '\n' {
				buf = append(buf, '\n')
			}
			dst.Write(buf)
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// reportLines formats a rank's failure report for the launcher's output:
// at most maxReportBytes of it, one output line per line of text, control
// characters other than tab replaced so that a report cannot rewrite the
// terminal.
func reportLines(text []byte) []string {
	const maxReportBytes = 4 << 10
	truncated := len(text) > maxReportBytes
	if truncated {
		text = text[:maxReportBytes]
	}
	s := strings.ToValidUTF8(string(text), "\uFFFD")
	s = strings.TrimRight(s, "\r\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Map(func(r rune) rune {
			if r == '\t' || (r >= ' ' && r != 0x7f && !(r >= 0x80 && r < 0xa0)) {
				return r
			}
			return '?'
		}, strings.TrimSuffix(l, "\r"))
	}
	if truncated {
		lines = append(lines, "... (truncated)")
	}
	return lines
}
