package etcdstore

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// endpoint is the test etcd server's client address, set by TestMain.
var endpoint string

func TestMain(m *testing.M) {
	if os.Getenv(rankEnv) != "" {
		os.Exit(runRank())
	}
	stop, err := startEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if os.Getenv("CI") != "" {
			os.Exit(1) // CI installs etcd-server (.ci/run): its absence is a failure there
		}
		fmt.Fprintln(os.Stderr, "etcdstore: skipping the tests that need an etcd server")
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd runs a one-member etcd server (Debian's etcd-server package) on
// random loopback ports with its data in a temporary directory, and waits
// until it answers.
func startEtcd() (stop func(), err error) {
	stop = func() {}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return stop, fmt.Errorf("etcdstore tests: no etcd server binary (apt-get install etcd-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "etcdstore-test-")
	if err != nil {
		return stop, err
	}
	for attempt := 0; ; attempt++ {
		cport, err1 := freePort()
		pport, err2 := freePort()
		if err1 != nil || err2 != nil {
			return stop, fmt.Errorf("free ports: %v %v", err1, err2)
		}
		client := "http://127.0.0.1:" + strconv.Itoa(cport)
		peer := "http://127.0.0.1:" + strconv.Itoa(pport)
		cmd := exec.Command(bin, "--name", "test", "--data-dir", filepath.Join(dir, strconv.Itoa(attempt)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "test="+peer, "--log-level", "error")
		dieWithParent(cmd)
		logf, _ := os.Create(filepath.Join(dir, "etcd.log"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return stop, err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop = func() {
			cmd.Process.Kill()
			<-exited
			os.RemoveAll(dir)
		}
		if err := waitReady(client, exited); err == nil {
			endpoint = "127.0.0.1:" + strconv.Itoa(cport)
			return stop, nil
		} else if attempt == 3 {
			log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			stop()
			return func() {}, fmt.Errorf("etcd server did not start: %v\n%s", err, log)
		}
		cmd.Process.Kill() // a port was taken meanwhile, say: try others
		<-exited
	}
}

// waitReady waits until the etcd server at url answers, or exits.
func waitReady(url string, exited chan error) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "ready")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("etcd exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// needEtcd skips t when no etcd server could be started.
func needEtcd(t testing.TB) {
	if endpoint == "" {
		t.Skip("no etcd server")
	}
}
