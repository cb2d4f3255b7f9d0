package etcdstore

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/store"
	"github.com/hcomm-go/hcomm/store/storetest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// freshPrefix returns a prefix no other test uses.
func freshPrefix(t testing.TB) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "hcomm-test/" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + hex.EncodeToString(b)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openStore(t *testing.T, prefix string, ttl time.Duration) *Store {
	t.Helper()
	s, err := New(testCtx(t), Config{Endpoints: []string{endpoint}, Prefix: prefix, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawClient is a plain etcd client for looking behind the Store's back.
func rawClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestSuite runs the suite every store.Store passes against a real etcd
// server, on a bare Store and through a prefix view.
func TestSuite(t *testing.T) {
	needEtcd(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, view := range []bool{false, true} {
		name := "bare"
		if view {
			name = "prefix"
		}
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Opener {
				prefix := freshPrefix(t)
				return func(t *testing.T) store.Store {
					var s store.Store = openStore(t, prefix, 0)
					if view {
						s = store.WithPrefix(s, "comm7")
						t.Cleanup(func() { s.Close() })
					}
					return s
				}
			})
		})
	}
}

// TestPrefixes checks that jobs with different prefixes do not see each
// other's keys and that keys are laid out under the prefix.
func TestPrefixes(t *testing.T) {
	needEtcd(t)
	ctx := testCtx(t)
	pa, pb := freshPrefix(t), freshPrefix(t)
	a, b := openStore(t, pa, 0), openStore(t, pb, 0)
	if err := a.Set(ctx, "card/0", []byte("job a")); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if v, err := b.Get(short, "card/0"); !errors.Is(err, store.ErrTimeout) {
		t.Fatalf("job b read job a's key: %q, %v", v, err)
	}
	r, err := rawClient(t).Get(ctx, pa+"/card/0")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "job a" {
		t.Fatalf("raw read of %s/card/0: %v, %v", pa, r, err)
	}
	if r.Kvs[0].Lease != int64(a.Lease()) {
		t.Errorf("key's lease %x, want the store's %x", r.Kvs[0].Lease, a.Lease())
	}
}

// TestOpenURL opens stores through store.Open, as hcomm.Init does.
func TestOpenURL(t *testing.T) {
	needEtcd(t)
	ctx := testCtx(t)
	prefix := freshPrefix(t)
	s, err := store.Open(ctx, "etcd://"+endpoint+"/"+prefix+"?ttl=7s", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	ttl, err := rawClient(t).TimeToLive(ctx, s.(*Store).Lease())
	if err != nil || ttl.GrantedTTL != 7 {
		t.Fatalf("lease of a ?ttl=7s store: %+v, %v", ttl, err)
	}
	for _, bad := range []string{
		"etcd://" + endpoint,
		"etcd://" + endpoint + "/",
		"etcd:///prefix",
		"etcd://" + endpoint + "/p?ttl=-1s",
		"etcd://" + endpoint + "/p?color=red",
	} {
		if s, err := store.Open(ctx, bad, ""); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

// TestDeadJobKeysExpire kills -9 a process that wrote keys and checks
// that etcd deletes them when the lease runs out.
func TestDeadJobKeysExpire(t *testing.T) {
	needEtcd(t)
	ctx := testCtx(t)
	prefix := freshPrefix(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), rankEnv+"=hold", "ETCDSTORE_TEST_URL=etcd://"+endpoint+"/"+prefix+"?ttl=2s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("child: %q, %v", line, err)
	}
	cli := rawClient(t)
	r, err := cli.Get(ctx, prefix+"/card/0")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the child's key: %v, %v", r, err)
	}
	w := cli.Watch(ctx, prefix+"/card/0", clientv3.WithRev(r.Header.Revision+1))
	cmd.Process.Kill()
	start := time.Now()
	for wr := range w {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				t.Logf("the dead process's key expired %v after the kill (TTL 2s)", time.Since(start).Round(time.Millisecond))
				return
			}
		}
	}
	t.Fatalf("the dead process's key was not deleted: %v", ctx.Err())
}

// TestCloseKeepsOthersWorking checks that closing one Store fails its own
// calls with ErrClosed and leaves another on the same prefix working.
func TestCloseKeepsOthersWorking(t *testing.T) {
	needEtcd(t)
	ctx := testCtx(t)
	prefix := freshPrefix(t)
	a, b := openStore(t, prefix, 0), openStore(t, prefix, 0)
	a.Close()
	if err := a.Set(ctx, "k", nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Set after Close: %v", err)
	}
	if err := b.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx, "big", make([]byte, DefaultMaxValueSize+1)); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Set of a value beyond MaxValueSize: %v", err)
	}
}

// TestInitThroughEtcd runs a job of separate processes that meet through
// HCOMM_STORE=etcd://… and all-reduce.
func TestInitThroughEtcd(t *testing.T) {
	needEtcd(t)
	const size = 3
	prefix := freshPrefix(t)
	cmds := make([]*exec.Cmd, size)
	outs := make([]strings.Builder, size)
	for r := range size {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), rankEnv+"=rank",
			"HCOMM_STORE=etcd://"+endpoint+"/"+prefix, "HCOMM_TOKEN=etcd-test",
			fmt.Sprint("HCOMM_RANK=", r), fmt.Sprint("HCOMM_SIZE=", size), "HCOMM_CONNECT_TIMEOUT=30s")
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r].String())
		} else if !strings.Contains(outs[r].String(), fmt.Sprint("sum ", size*(size+1)/2)) {
			t.Errorf("rank %d printed %q", r, outs[r].String())
		}
	}
}

const rankEnv = "ETCDSTORE_TEST_CHILD"

// runRank is a child process of the tests: "hold" writes a key and waits to
// be killed; "rank" is a rank of TestInitThroughEtcd.
func runRank() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch os.Getenv(rankEnv) {
	case "hold":
		s, err := store.Open(ctx, os.Getenv("ETCDSTORE_TEST_URL"), "")
		if err == nil {
			err = s.Set(ctx, "card/0", []byte("alive"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("ready")
		<-ctx.Done()
		return 0
	case "rank":
		c, err := hcomm.Init(ctx, nil)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer c.Close()
		v := []int64{int64(c.Rank() + 1)}
		if err := hcomm.AllReduce(ctx, c, v, v, hcomm.Sum); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("sum", v[0])
		return 0
	}
	return 2
}
