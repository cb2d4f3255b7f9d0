package tcp

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// envGo names the file whose creation lets flooded helpers go on.
const envGo = "HCOMM_TCP_TEST_GO"

// floodRounds is how many rounds of all-pairs exchanges the flooded ranks
// run under the flood.
const floodRounds = 30

// flooded is run by every rank of TestFlood: it connects its ring
// neighbours, says READY, waits for the flood to start, and then runs
// rounds of exchanges with every other rank, so that the connections to
// the non-neighbours are dialed lazily under the flood.
func flooded(ctx context.Context, tr *Transport) error {
	n, r := tr.Size(), tr.Rank()
	if err := tr.Connect(ctx, []int{(r + 1) % n, (r + n - 1) % n}); err != nil {
		return fmt.Errorf("connect the ring neighbours: %w", err)
	}
	fmt.Println("READY")
	for {
		if _, err := os.Stat(os.Getenv(envGo)); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	for round := 0; round < floodRounds; round++ {
		for d := 1; d < n; d++ {
			to, from := (r+d)%n, (r-d+n)%n
			size := 1000
			if round%10 == 9 {
				size = 256 << 10
			}
			seq := round*n + d
			out, in := make([]byte, size), make([]byte, size)
			fill(out, r, seq)
			errc := make(chan error, 1)
			go func() {
				fp := fpFor(seq, size)
				errc <- tr.Send(ctx, to, &fp, out)
			}()
			fp := fpFor(seq, size)
			if err := tr.Recv(ctx, from, &fp, in); err != nil {
				return fmt.Errorf("round %d: recv from %d: %w", round, from, err)
			}
			if err := <-errc; err != nil {
				return fmt.Errorf("round %d: send to %d: %w", round, to, err)
			}
			if err := check(in, from, seq); err != nil {
				return err
			}
		}
	}
	return barrier(ctx, tr)
}

// flood opens connections to addrs from goroutines in a loop until stop is
// closed, from source addresses srcs, in four manners: connect and close;
// send garbage; send a well-formed handshake and a wrong proof; connect and
// say nothing until the listener closes. It returns the number of
// connections made.
func flood(addrs, srcs []string, goroutines int, stop <-chan struct{}) *atomic.Int64 {
	var made atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(srcs[g%len(srcs)])}}
			buf := make([]byte, 512)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := d.Dial("tcp", addrs[(g+i)%len(addrs)])
				if err != nil {
					continue
				}
				made.Add(1)
				c.SetDeadline(time.Now().Add(15 * time.Second))
				go func() { <-stop; c.Close() }()
				switch g % 4 {
				case 1:
					rand.Read(buf)
					c.Write(buf)
				case 2:
					c.Write(rawHello(0, 1+i%3, 4, 1, nil))
					if _, err := wire.ReadHandshakeReply(c); err == nil {
						c.Write(buf[:wire.ProofSize])
					}
				}
				if g%4 != 0 {
					io.Copy(io.Discard, c)
				}
				c.Close()
			}
		}()
	}
	go func() { <-stop; wg.Wait() }()
	return &made
}

// TestFlood runs a job of four helper processes through rounds of
// exchanges whose connections are partly dialed under a flood of hundreds
// of looping unauthenticated connections, from another address and from
// the ranks' own: the job completes, and each rank logs the refusals in a
// few lines.
func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods listeners")
	}
	const n = 4
	w := newWorld(t, n, 1)
	goFile := filepath.Join(t.TempDir(), "go")
	for r := 0; r < n; r++ {
		w.spawn(r, "flooded", envGo+"="+goFile)
	}
	// Wait for the ranks to be up.
	deadline := time.Now().Add(30 * time.Second)
	for r := 0; r < n; r++ {
		for !strings.Contains(w.procs[r].out.String(), "READY") {
			select {
			case <-w.procs[r].done:
				t.Fatalf("rank %d exited: %v\n%s", r, w.procs[r].err, w.procs[r].out.String())
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d not ready", r)
			}
		}
	}
	stop := make(chan struct{})
	made := flood(w.addrs, []string{"127.0.0.2", "127.0.0.2", "127.0.0.1"}, 300, stop)
	defer close(stop)
	for made.Load() < 300 {
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for r := 0; r < n; r++ {
		w.wait(r, 60*time.Second)
	}
	during := made.Load()
	t.Logf("%d rounds in %v under a flood of %d connections", floodRounds, time.Since(start), during)
	t.Logf("rank 0 logged:\n%s", w.procs[0].out.String())
	for r := 0; r < n; r++ {
		out := w.procs[r].out.String()
		lines := strings.Count(out, "refused connection")
		if lines > 6 || len(out) > 16<<10 {
			t.Errorf("rank %d logged %d refusal lines, %d bytes:\n%s", r, lines, len(out), lastLines(out, 20))
		}
		if !strings.Contains(out, "tcp: refused connections") || !strings.Contains(out, "count=") {
			t.Errorf("rank %d did not log a count of refusals:\n%s", r, lastLines(out, 20))
		}
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
