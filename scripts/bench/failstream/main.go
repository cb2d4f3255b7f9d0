// Command failstream runs a steady stream of large, checked collectives
// (AllReduce or Broadcast of float32) for a set time and writes, from rank
// 0, the start and end of every call, so that scripts/bench/failover.sh can
// tell the throughput before, during and after a link is taken down in the
// middle of the stream.
//
//	hcomm run -n 2 -- failstream -op allreduce -bytes 32M -for 20s -mark /tmp/m -mark-after 6s -out /tmp/calls
//
// Every rank checks every element of every result and exits with status 1
// at the first wrong one or an error. Rank 0 creates the file -mark once -mark-after
// has passed (the script's cue to take the link down), decides when the
// stream ends (carried to the other ranks in one more element of each
// call), and writes -out: a header line, one line per call
// ("call I START_NS END_NS", and with -shares after each a "share I END_NS
// peer:path:retired:share:rate ..." line of its paths), then one line per network path of its
// communicator as hcomm.Comm.NetPaths reports it at the end; the other
// ranks write their paths to -out with ".rankN" added.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/hcomm-go/hcomm"
)

func main() {
	op := flag.String("op", "allreduce", "collective: allreduce or broadcast")
	size := flag.String("bytes", "32M", "bytes per call (K/M suffixes)")
	dur := flag.Duration("for", 20*time.Second, "how long the stream runs")
	mark := flag.String("mark", "", "file rank 0 creates after -mark-after")
	markAfter := flag.Duration("mark-after", 6*time.Second, "when rank 0 creates -mark, from the first call")
	out := flag.String("out", "", "file rank 0 writes the calls and paths to (default: standard output)")
	flag.BoolVar(&shares, "shares", false, "after each call, rank 0 also writes its paths' shares and rates (\"share\" lines)")
	flag.Parse()
	n, err := parseSize(*size)
	if err == nil && *op != "allreduce" && *op != "broadcast" {
		err = fmt.Errorf("-op %q: want allreduce or broadcast", *op)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "failstream:", err)
		os.Exit(2)
	}
	if err := run(*op, n/4, *dur, *mark, *markAfter, *out); err != nil {
		fmt.Fprintln(os.Stderr, "failstream:", err)
		os.Exit(1)
	}
}

// shares is -shares.
var shares bool

// asBytes is x's memory (the values compared bit for bit: no NaN here).
func asBytes(x []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
}

func parseSize(s string) (int, error) {
	mul := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 || v*mul < 4 {
		return 0, fmt.Errorf("-bytes %q: want a positive size of at least 4 bytes", s)
	}
	return v * mul, nil
}

// run is one rank's stream of calls of n elements (plus the stop flag).
// The data alternate between two patterns, each laid out (with the
// result it must give) once, so that filling and checking cost a copy and
// a comparison per call, and a result left from the call before fails
// the check.
func run(op string, n int, dur time.Duration, mark string, markAfter time.Duration, out string) error {
	ctx := context.Background()
	c, err := hcomm.Init(ctx, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	rank, size := c.Rank(), c.Size()
	var src, want [2][]float32
	for k := range src {
		src[k], want[k] = make([]float32, n+1), make([]float32, n)
		// AllReduce: Σ_r (r+1)(k+1) + size·(j%5); Broadcast: rank 0's data.
		ranks := float32(size * (size + 1) / 2)
		for j := range n {
			src[k][j] = float32(rank+1)*float32(k+1) + float32(j%5)
			want[k][j] = ranks*float32(k+1) + float32(size*(j%5))
			if op == "broadcast" {
				src[k][j] = float32(k+1) + float32(j%5)
				want[k][j] = src[k][j]
			}
		}
	}
	buf := make([]float32, n+1)
	// The stream starts when every rank has laid out its data.
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	var lines strings.Builder
	var first time.Time
	marked := mark == ""
	for i := 0; ; i++ {
		k := i % 2
		s := src[k]
		s[n] = 0
		if rank == 0 && i > 0 && time.Since(first) >= dur {
			s[n] = 1
		}
		start := time.Now()
		if i == 0 {
			first = start
		}
		if op == "allreduce" {
			err = hcomm.AllReduce(ctx, c, s, buf, hcomm.Sum)
		} else {
			if rank == 0 {
				copy(buf, s)
			}
			err = hcomm.Broadcast(ctx, c, buf, 0)
		}
		end := time.Now()
		if err != nil {
			return fmt.Errorf("rank %d: %s %d: %w", rank, op, i, err)
		}
		fmt.Fprintf(&lines, "call %d %d %d\n", i, start.UnixNano(), end.UnixNano())
		if shares && rank == 0 {
			// "share I END_NS peer:path:retired:share:rate ..."
			fmt.Fprintf(&lines, "share %d %d", i, end.UnixNano())
			for _, p := range c.NetPaths() {
				fmt.Fprintf(&lines, " %d:%d:%t:%.3f:%.0f", p.Peer, p.Path, p.Retired, p.Share, p.Rate)
			}
			lines.WriteByte('\n')
		}
		if !bytes.Equal(asBytes(buf[:n]), asBytes(want[k])) {
			for j := range n {
				if buf[j] != want[k][j] {
					return fmt.Errorf("rank %d: %s %d: element %d is %v, want %v", rank, op, i, j, buf[j], want[k][j])
				}
			}
		}
		if !marked && rank == 0 && end.Sub(first) >= markAfter {
			if err := os.WriteFile(mark, nil, 0o644); err != nil {
				return err
			}
			marked = true
		}
		if buf[n] != 0 {
			break
		}
	}
	w := os.Stdout
	if rank != 0 && out == "" {
		return nil
	}
	if out != "" {
		if rank != 0 {
			out += ".rank" + strconv.Itoa(rank)
		}
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	if rank == 0 {
		algo := "?"
		if e, err := c.ExplainPlan(op, hcomm.DTypeFloat32, n+1); err == nil {
			algo = e.Algo
		}
		fmt.Fprintf(bw, "failstream op=%s bytes=%d ranks=%d algo=%s\n", op, 4*n, size, algo)
		bw.WriteString(lines.String())
	}
	for _, p := range c.NetPaths() {
		fmt.Fprintf(bw, "path peer=%d path=%d %s->%s up=%t retired=%t sent=%d received=%d share=%.3f rate=%.0f retrans=%d rtt=%v\n",
			p.Peer, p.Path, p.Local, p.Remote, p.Up, p.Retired, p.Sent, p.Received, p.Share, p.Rate, p.Retrans, p.RTT)
	}
	return bw.Flush()
}
