package sched

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// String renders the op as the printer does: its kind, then the peer it
// receives from (<-p) and the rank it sends to (->p), then the regions it
// uses, source before destination, e.g. "recv-reduce <-0 in[0:+3] out[0:+3]".
func (o Op) String() string {
	switch o.Kind {
	case Send:
		return fmt.Sprintf("%v ->%d %v", o.Kind, o.Peer, o.Src)
	case Recv:
		return fmt.Sprintf("%v <-%d %v", o.Kind, o.Peer, o.Dst)
	case RecvReduce:
		return fmt.Sprintf("%v <-%d %v %v", o.Kind, o.Peer, o.Src, o.Dst)
	case RecvReduceSend:
		return fmt.Sprintf("%v <-%d ->%d %v %v", o.Kind, o.Peer, o.To, o.Src, o.Dst)
	case RecvCopySend:
		return fmt.Sprintf("%v <-%d ->%d %v", o.Kind, o.Peer, o.To, o.Dst)
	case Copy, LocalReduce:
		return fmt.Sprintf("%v %v %v", o.Kind, o.Src, o.Dst)
	}
	return fmt.Sprintf("%v <-%d ->%d %v %v", o.Kind, o.Peer, o.To, o.Src, o.Dst)
}

// String renders the program in the printer's text form: a header line
//
//	program ALGO rank R/N scratch S
//
// then one line per step, its ops separated by " | ":
//
//	step 0: send ->2 in[3:+3] | recv-reduce <-0 in[0:+3] out[0:+3]
//
// The form is stable, so it can be compared in golden files. An empty Algo,
// or one that is not a single printable word, is quoted.
func (p *Program) String() string {
	var b strings.Builder
	writeProgram(&b, p)
	return b.String()
}

// Fprint writes p.String() to w.
func Fprint(w io.Writer, p *Program) error {
	_, err := io.WriteString(w, p.String())
	return err
}

// FormatAll renders every program, in order, separated by blank lines.
func FormatAll(progs []*Program) string {
	var b strings.Builder
	for i, p := range progs {
		if i > 0 {
			b.WriteByte('\n')
		}
		writeProgram(&b, p)
	}
	return b.String()
}

func writeProgram(b *strings.Builder, p *Program) {
	if p == nil {
		b.WriteString("program <nil>\n")
		return
	}
	algo := p.Algo
	if algo == "" || strings.IndexFunc(algo, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		algo = strconv.Quote(algo)
	}
	fmt.Fprintf(b, "program %s rank %d/%d scratch %d\n", algo, p.Rank, p.Size, p.Scratch)
	for i, st := range p.Steps {
		fmt.Fprintf(b, "step %d:", i)
		for j, op := range st.Ops {
			if j > 0 {
				b.WriteString(" |")
			}
			b.WriteByte(' ')
			b.WriteString(op.String())
		}
		b.WriteByte('\n')
	}
}
