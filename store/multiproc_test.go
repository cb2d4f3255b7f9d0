package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment of the child processes of TestMultiProcess. TestMain runs
// runChild instead of the tests when childEnv is set.
const (
	childEnv     = "HCOMM_STORE_TEST_CHILD" // the child's rank
	childSizeEnv = "HCOMM_STORE_TEST_SIZE"
	childURLEnv  = "HCOMM_STORE_TEST_URL"
	childTokEnv  = "HCOMM_STORE_TEST_TOKEN"
)

// TestMultiProcess runs ranks as separate processes (this test binary,
// re-executed) that rendezvous through a store in the parent, over real
// sockets or a real shared directory.
func TestMultiProcess(t *testing.T) {
	checkNoLeaks(t)
	const size = 4
	srv := startServer(t, ServerConfig{Token: testToken})
	for _, url := range []string{"tcp://" + srv.Addr().String(), "file://" + t.TempDir()} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			type child struct {
				cmd *exec.Cmd
				out bytes.Buffer
			}
			children := make([]*child, size)
			for rank := range children {
				c := &child{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$")}
				c.cmd.Env = append(os.Environ(),
					childEnv+"="+strconv.Itoa(rank),
					childSizeEnv+"="+strconv.Itoa(size),
					childURLEnv+"="+url,
					childTokEnv+"="+testToken)
				c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
				if err := c.cmd.Start(); err != nil {
					t.Fatal(err)
				}
				children[rank] = c
			}
			for rank, c := range children {
				if err := c.cmd.Wait(); err != nil {
					t.Errorf("rank %d: %v\n%s", rank, err, c.out.String())
				}
			}
			if t.Failed() {
				return
			}
			// The ranks were distinct processes, and the counter is exact.
			s, err := Open(ctx, url, testToken)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			pids := map[string]bool{strconv.Itoa(os.Getpid()): true}
			for rank := range size {
				v, err := s.Get(ctx, fmt.Sprintf("rank/%d", rank))
				if err != nil {
					t.Fatal(err)
				}
				pid := strings.TrimPrefix(string(v), "pid ")
				if pids[pid] {
					t.Errorf("rank %d reports pid %s, already seen", rank, pid)
				}
				pids[pid] = true
			}
			if v, err := s.Get(ctx, "counter"); err != nil || string(v) != strconv.Itoa(size) {
				t.Errorf("counter = %q, %v; want %d", v, err, size)
			}
		})
	}
}

// runChild is one rank of TestMultiProcess, or with childEnv=server the
// server of TestServerKilled. It returns the exit code.
func runChild() int {
	if os.Getenv(childEnv) == "server" {
		return runServerChild()
	}
	if err := child(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv(childEnv), err)
		return 1
	}
	return 0
}

func child() error {
	rank, err := strconv.Atoi(os.Getenv(childEnv))
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(os.Getenv(childSizeEnv))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, os.Getenv(childURLEnv), os.Getenv(childTokEnv))
	if err != nil {
		return err
	}
	defer s.Close()

	if err := s.Set(ctx, fmt.Sprintf("rank/%d", rank), fmt.Appendf(nil, "pid %d", os.Getpid())); err != nil {
		return err
	}
	keys := make([]string, size)
	for i := range keys {
		keys[i] = fmt.Sprintf("rank/%d", i)
	}
	if err := s.Wait(ctx, keys...); err != nil {
		return err
	}
	for i, k := range keys {
		v, err := s.Get(ctx, k)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(v, []byte("pid ")) || (i == rank && string(v) != fmt.Sprintf("pid %d", os.Getpid())) {
			return fmt.Errorf("%s = %q", k, v)
		}
	}
	n, err := s.Add(ctx, "counter", 1)
	if err != nil {
		return err
	}
	if n < 1 || n > int64(size) {
		return fmt.Errorf("Add returned %d, want 1..%d", n, size)
	}
	if n == int64(size) {
		if err := s.Set(ctx, "all-added", nil); err != nil {
			return err
		}
	}
	if err := s.Wait(ctx, "all-added"); err != nil {
		return err
	}
	v, err := s.Get(ctx, "counter")
	if err != nil {
		return err
	}
	if string(v) != strconv.Itoa(size) {
		return fmt.Errorf("counter = %q after everyone added, want %d", v, size)
	}
	return nil
}

// runServerChild serves a store, prints its address and runs until
// killed, printing "parked KEY..." for each Get or Wait it parks.
func runServerChild() int {
	testHookParked = func(keys []string) { fmt.Println("parked", strings.Join(keys, " ")) }
	srv, err := NewServer(ServerConfig{Token: os.Getenv(childTokEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.Addr())
	select {}
}

// TestServerKilled kills (SIGKILL) a server process while a client waits on
// it: the wait and every later call must fail promptly.
func TestServerKilled(t *testing.T) {
	checkNoLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=server", childTokEnv+"="+testToken)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	br := bufio.NewReader(out)
	addr, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's address: %v", err)
	}
	c := dialTest(t, strings.TrimSpace(addr), testToken)
	if err := c.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Wait(ctx, "never") }()
	// Kill the server once it has the Wait parked (it says so).
	if line, err := br.ReadString('\n'); err != nil || strings.TrimSpace(line) != "parked never" {
		t.Fatalf("reading the server's report of the parked Wait: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait on a killed server: err = %v, want ErrClosed", err)
		}
		t.Logf("Wait failed %v after the kill: %v", time.Since(start), err)
	case <-time.After(3 * time.Second):
		t.Fatal("Wait still blocked 3s after the server was killed")
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after the server was killed: err = %v, want ErrClosed", err)
	}
}
