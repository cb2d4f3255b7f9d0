package hcomm

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/store"
)

// TestStoreReusedBySecondJob runs a job of two processes through one
// `hcomm store` process, then a second job through the same store: every
// rank of the second job must fail at once saying the store already served
// a job, not after the connect timeout with the first job's addresses.
func TestStoreReusedBySecondJob(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, launcher(t), "store", "--listen", "127.0.0.1:0", "--token", "reuse-test")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HCOMM_STORE=") {
		t.Fatalf("hcomm store printed %q, %v", line, err)
	}
	env := []string{strings.TrimSpace(line), "HCOMM_TOKEN=reuse-test", "HCOMM_CONNECT_TIMEOUT=90s"}

	if out, err := spawnRanks(t, 2, "barrier", env...); err != nil {
		t.Fatalf("first job: %v\n%s", err, out)
	}
	start := time.Now()
	out2, err := spawnRanks(t, 2, "barrier", env...)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("a second job through the same store succeeded")
	}
	if n := strings.Count(out2, "this store already served a job"); n != 2 {
		t.Errorf("%d of 2 ranks of the second job said the store already served a job:\n%s", n, out2)
	}
	if elapsed > 45*time.Second {
		t.Errorf("the second job failed after %v, want at once (its connect timeout is 90s)", elapsed)
	}
	t.Logf("second job failed after %v", elapsed.Round(time.Millisecond))
}

// TestConfigRendezvous runs ranks that meet through a store the program
// passes in Config.Rendezvous, and checks that Init leaves it open.
func TestConfigRendezvous(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fs, err := store.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	const n = 2
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Go(func() {
			c, err := Init(ctx, &Config{Rank: r, Size: n, Rendezvous: fs, Token: "rendezvous-test", Transport: "tcp"})
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			v := []int64{int64(r + 1)}
			if err := AllReduce(ctx, c, v, v, Sum); err != nil {
				errs[r] = err
			} else if v[0] != 3 {
				errs[r] = errors.New("wrong sum")
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := fs.Set(ctx, "still-open", nil); err != nil {
		t.Fatalf("the program's store after the communicators closed: %v", err)
	}
	// The same store again is a second job.
	_, err = Init(ctx, &Config{Rank: 0, Size: n, Rendezvous: fs, Token: "rendezvous-test"})
	if !errors.Is(err, store.ErrReused) {
		t.Fatalf("Init through a store that served a job: err = %v, want store.ErrReused", err)
	}
}
