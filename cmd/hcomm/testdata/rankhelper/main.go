// Command rankhelper is a rank program for the tests of hcomm run. Its
// arguments are actions done in order; "rankN:action" does the action only
// on rank N:
//
//	env            print rank=R size=S local_rank=LR local_size=LS tokenlen=L store=URL hostname=H
//	pid            print pid=P
//	token          print token=HCOMM_TOKEN
//	procs          print gomaxprocs=N (runtime.GOMAXPROCS)
//	getenv=NAME    print NAME=VALUE
//	setenv=NAME=V  set the environment variable NAME to V
//	cpus           print cpus=LIST, the process's Cpus_allowed_list
//	threads        print threads=LIST;LIST;..., the distinct
//	               Cpus_allowed_list of its threads, sorted
//	grandchild     start a copy of itself that sleeps 60s; print grandchild=P
//	sleep=D        sleep for duration D
//	exit=C         exit with status C
//	signal=NAME    kill itself with SIGKILL or SIGTERM
//	ignore-term    ignore SIGTERM from now on
//	print=TEXT     print TEXT and a newline on stdout (\n in TEXT is a newline)
//	partial=TEXT   print TEXT on stdout without a newline
//	stderr=TEXT    print TEXT and a newline on stderr
//	lines=N        print N numbered lines of 200 bytes
//	report=TEXT    set hcomm/report/<rank> in the job's store to TEXT
//	store          publish a key in the store and wait for every rank's; print store-ok
//	init           hcomm.Init; print init-ok
//	barrier        a Barrier on the communicator of init
//	allreduce      an AllReduce of one int64 on it
//	bigallreduce   an AllReduce of 4 MiB on it (through the executor)
//	close          close the communicator of init (finishing an HCOMM_TRACE file)
//	topolive=BIN   run BIN topo -live HCOMM_STORE and print its output
//	enter          start an AllReduce on it and print entered once its flight
//	               recorder shows it running
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/store"
)

// comm is the communicator of the init action.
var comm *hcomm.Comm

func main() {
	rank, _ := strconv.Atoi(os.Getenv("HCOMM_RANK"))
	for _, a := range os.Args[1:] {
		if cond, rest, ok := strings.Cut(a, ":"); ok && strings.HasPrefix(cond, "rank") {
			if cond != "rank"+strconv.Itoa(rank) {
				continue
			}
			a = rest
		}
		if err := do(rank, a); err != nil {
			fmt.Fprintf(os.Stderr, "rankhelper %d: %s: %v\n", rank, a, err)
			os.Exit(99)
		}
	}
}

// allowedList returns the Cpus_allowed_list line of a status file.
func allowedList(status string) (string, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s has no Cpus_allowed_list", status)
}

func do(rank int, action string) error {
	name, arg, _ := strings.Cut(action, "=")
	switch name {
	case "env":
		fmt.Printf("rank=%s size=%s local_rank=%s local_size=%s tokenlen=%d store=%s hostname=%s\n",
			os.Getenv("HCOMM_RANK"), os.Getenv("HCOMM_SIZE"), os.Getenv("HCOMM_LOCAL_RANK"),
			os.Getenv("HCOMM_LOCAL_SIZE"), len(os.Getenv("HCOMM_TOKEN")), os.Getenv("HCOMM_STORE"),
			os.Getenv("HCOMM_HOSTNAME"))
	case "token":
		fmt.Printf("token=%s\n", os.Getenv("HCOMM_TOKEN"))
	case "pid":
		fmt.Printf("pid=%d\n", os.Getpid())
	case "procs":
		fmt.Printf("gomaxprocs=%d\n", runtime.GOMAXPROCS(0))
	case "getenv":
		fmt.Printf("%s=%s\n", arg, os.Getenv(arg))
	case "setenv":
		k, v, _ := strings.Cut(arg, "=")
		return os.Setenv(k, v)
	case "cpus":
		l, err := allowedList("/proc/self/status")
		if err != nil {
			return err
		}
		fmt.Printf("cpus=%s\n", l)
	case "threads":
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, t := range tasks {
			if l, err := allowedList("/proc/self/task/" + t.Name() + "/status"); err == nil {
				seen[l] = true
			}
		}
		lists := slices.Sorted(maps.Keys(seen))
		fmt.Printf("threads=%s\n", strings.Join(lists, ";"))
	case "grandchild":
		cmd := exec.Command(os.Args[0], "sleep=60s")
		cmd.Env = append(os.Environ(), "HCOMM_RANK=-1")
		if err := cmd.Start(); err != nil {
			return err
		}
		fmt.Printf("grandchild=%d\n", cmd.Process.Pid)
	case "sleep":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return err
		}
		time.Sleep(d)
	case "exit":
		c, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		os.Exit(c)
	case "signal":
		sig := map[string]syscall.Signal{"SIGKILL": syscall.SIGKILL, "SIGTERM": syscall.SIGTERM}[arg]
		if sig == 0 {
			return fmt.Errorf("unknown signal")
		}
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig)
		time.Sleep(10 * time.Second)
		return fmt.Errorf("still alive")
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
	case "print":
		fmt.Println(strings.ReplaceAll(arg, `\n`, "\n"))
	case "partial":
		fmt.Print(arg)
	case "stderr":
		fmt.Fprintln(os.Stderr, arg)
	case "lines":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		for i := range n {
			line := fmt.Sprintf("rank %d line %d ", rank, i)
			fmt.Println(line + strings.Repeat("x", 200-len(line)))
		}
	case "report", "store":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := store.Open(ctx, os.Getenv("HCOMM_STORE"), os.Getenv("HCOMM_TOKEN"))
		if err != nil {
			return err
		}
		defer s.Close()
		if name == "report" {
			return s.Set(ctx, "hcomm/report/"+strconv.Itoa(rank), []byte(strings.ReplaceAll(arg, `\n`, "\n")))
		}
		size, _ := strconv.Atoi(os.Getenv("HCOMM_SIZE"))
		if err := s.Set(ctx, "test/"+strconv.Itoa(rank), []byte("here")); err != nil {
			return err
		}
		keys := make([]string, size)
		for i := range keys {
			keys[i] = "test/" + strconv.Itoa(i)
		}
		if err := s.Wait(ctx, keys...); err != nil {
			return err
		}
		fmt.Println("store-ok")
	case "init":
		c, err := hcomm.Init(context.Background(), nil)
		if err != nil {
			return err
		}
		comm = c
		fmt.Println("init-ok")
	case "barrier":
		return comm.Barrier(context.Background())
	case "close":
		return comm.Close()
	case "allreduce":
		v := []int64{1}
		return hcomm.AllReduce(context.Background(), comm, v, v, hcomm.Sum)
	case "bigallreduce":
		v := make([]int64, 1<<19)
		return hcomm.AllReduce(context.Background(), comm, v, v, hcomm.Sum)
	case "topolive":
		out, err := exec.Command(arg, "topo", "-live", os.Getenv("HCOMM_STORE")).CombinedOutput()
		fmt.Printf("%s", out)
		return err
	case "enter":
		go func() {
			v := []int64{1}
			if err := hcomm.AllReduce(context.Background(), comm, v, v, hcomm.Sum); err != nil {
				fmt.Fprintf(os.Stderr, "rankhelper %d: allreduce: %v\n", rank, err)
				os.Exit(99)
			}
		}()
		for {
			var b strings.Builder
			comm.WriteState(&b)
			if strings.Contains(b.String(), " running ") {
				break
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Println("entered")
	default:
		return fmt.Errorf("unknown action")
	}
	return nil
}
