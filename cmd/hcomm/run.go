package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/store"
)

// run: `hcomm run` starts the ranks of a job, like mpirun or torchrun.
//
//	hcomm run -n 4 -- ./prog args...
//	hcomm run --hosts node1:8,node2:8 -- /shared/bin/prog
//	hcomm run --host-file hosts --rsh ./netns-rsh --store-addr 10.9.0.1:0 -- ./prog
//
// Rendezvous. The launcher makes a fresh job token (32 random bytes, written
// as 64 hex digits), serves a store (package store) and starts every rank
// with HCOMM_RANK, HCOMM_SIZE, HCOMM_LOCAL_RANK, HCOMM_LOCAL_SIZE,
// HCOMM_STORE (tcp://host:port) and HCOMM_TOKEN, which hcomm.Init reads.
// The store admits clients whose token is the text of HCOMM_TOKEN. When all
// ranks are local the store listens on 127.0.0.1; with remote hosts it
// listens on all interfaces and tells the ranks the host of --store-addr or,
// failing that, this machine's first non-loopback IPv4 address.
//
// Placement. --hosts a:2,b:2 (or a --host-file with one "host", "host:N" or
// "host slots=N" per line, # for comments) puts ranks 0 and 1 on a and 2 and
// 3 on b; -n defaults to the total number of slots and may be smaller. With
// no hosts every rank runs here. localhost, loopback addresses and this
// machine's host name mean this machine.
//
// Remote ranks. A rank on another host is started as
//
//	RSH HOST IFS= read -r HCOMM_TOKEN && export HCOMM_TOKEN && exec env HCOMM_...=... PROG ARGS... </dev/null
//
// where RSH is --rsh split at blanks (default ssh) and every word after HOST
// is quoted for a POSIX shell, since ssh joins them and hands them to the
// remote user's shell (which must therefore be a POSIX shell: sh, bash,
// dash, zsh). The job token is not on that command line, where every user
// of either host could read it (ps): the launcher writes it to the rsh
// command's standard input, which the remote shell reads into HCOMM_TOKEN
// before it runs the rank with /dev/null as standard input. A replacement
// rsh must do the same, for example
//
//	#!/bin/sh
//	host=$1; shift
//	exec ip netns exec "$host" sh -c "$*"
//
// Remote ranks also get HCOMM_HOSTNAME=HOST, so that hosts sharing a kernel
// (network namespaces) still count as different hosts, every HCOMM_*
// variable of the launcher's environment, and the -x variables. A relative
// program path containing a slash is made absolute: hosts are expected to
// share the file system. Local ranks inherit the launcher's environment
// and get the token in it (exec.Cmd.Env), which only their user can read.
// Ranks read standard input from /dev/null.
//
// CPUs. Unless GOMAXPROCS is set (in the environment or with -x), each
// local rank gets GOMAXPROCS = the launcher's CPUs / local ranks (at least
// 1), as torchrun sets OMP_NUM_THREADS and mpirun binds ranks to cores: the
// ranks share the machine, and a Go process that assumes it has every CPU
// keeps spare threads spinning for work, which takes the CPU from the
// busy threads of the other ranks. Remote ranks are left alone.
//
// Binding. --bind-to core|numa (mpirun's names) starts each
// rank bound to CPUs of this machine (sched_setaffinity, inherited through
// exec): core gives local rank i the i-th CPU the launcher may use, numa
// spreads the local ranks over the NUMA nodes, consecutive ranks on one
// node, each bound to its node's CPUs. More local ranks than CPUs (on a
// node, for numa) is an error, as in mpirun, unless the policy ends in
// :overload-allowed (core then wraps around the CPUs). A rank started through --rsh binds itself the same way on
// its own machine at Init (HCOMM_BIND_TO, with its local rank and the
// host's local size), since binding the rsh command would not reach a
// rank over ssh. A bound rank pins its polling goroutines to its CPUs
// (HCOMM_CPU_AFFINITY=auto). The default, auto, binds nothing at start;
// where several hosts of the job turn out to share a machine (network
// namespaces, containers) and none of their ranks is bound, each rank
// binds itself at Init to its share of that machine's CPUs, so that the
// hosts' leaders run on different CPUs. --bind-to none leaves every rank
// unbound (HCOMM_BIND_TO=none).
//
// Output. The ranks' standard output and error go to the launcher's, a line
// at a time, so that lines of different ranks never mix; with --tag-output
// each line starts with "[rank] ". Lines longer than 64 KiB are cut.
//
// Stopping. Each rank runs in its own process group; when its process exits,
// whatever it left in that group is killed. Local ranks die with the
// launcher (Linux parent-death signal). When a rank exits with a non-zero
// status or is killed by a signal, the launcher prints
//
//	hcomm run: rank 2 (pid 4711 on node1) exited with status 3
//
// gives the other ranks --report-window (default 2s) to notice the loss,
// say so and exit on their own, and then stops those still running: it
// sends SIGTERM to every remaining rank's process group and, after --grace
// (default 3s), SIGKILL. --timeout stops the job the same way when it runs
// too long. SIGINT, SIGTERM and SIGHUP sent to the launcher are passed on to
// every rank's group; a second one kills them all at once. Before it sends
// the first signal, the launcher asks the ranks still running for their
// state through the store (runstate.go) and prints, for each rank that has
// initialised hcomm, its communicators' last operation, and who is waiting
// for whom:
//
//	hcomm run:   rank 1 (pid 4712): communicator world rank 1: op #7 AllReduce(int64, 1, sum) running for 2.1s (last completed #6)
//	hcomm run:   communicator world: ranks 0-1 wait in op #7 AllReduce(int64, 1, sum); rank 2 last completed op #6 and has not entered #7
//
// Traces. When the job runs with HCOMM_TRACE=job.json (in the launcher's
// environment or with -x), each rank writes job.rankN.json and the
// launcher, once every rank has exited, merges the files it can read into
// job.json (runtrace.go).
//
// After stopping a job the launcher prints the failure reports the ranks
// left in the store under hcomm/report/<rank>, one output line per line of
// text:
//
//	hcomm run: rank 1: AllReduce #7: peer 2 lost
//
// With --verbose it prints the store's address and every rank's host, local
// rank and pid when the job starts.
//
// For a remote rank the pid is that of the local rsh process; stopping it
// closes the connection, after which the remote rank loses the store and
// its peers and fails on its own.
//
// Exit status: 0 when every rank exits 0; otherwise the status of the first
// rank that failed (128+N when it was killed by signal N); 124 when
// --timeout expired; 128+N when the launcher was stopped by signal N; 1
// when the job could not be started; 2 for a usage error.

// Exit statuses of hcomm run besides those of failed ranks.
const (
	exitLaunchFailed = 1
	exitUsage        = 2
	exitTimeout      = 124
	exitSignalBase   = 128
)

const (
	defaultGrace = 3 * time.Second
	// defaultWindow is how long the other ranks have, after a rank
	// failed, to notice (hcomm ranks do within about a second), report
	// and exit before the launcher stops them.
	defaultWindow = 2 * time.Second
	// outputDrainTimeout bounds the wait for the ranks' output once they
	// have exited: a process that left its group may hold a pipe open.
	outputDrainTimeout = 2 * time.Second
	// reportTimeout bounds the reading of failure reports from the store.
	reportTimeout = 500 * time.Millisecond
	// reportKeyPrefix + rank is where a rank may leave a failure report.
	reportKeyPrefix = "hcomm/report/"
	tokenBytes      = 32
)

const runUsage = `usage: hcomm run [flags] [--] program [args...]

Starts the ranks of a job. Flags:
`

// runConfig is what a command line asks hcomm run to do.
type runConfig struct {
	n         int
	hosts     []hostSlots
	rsh       []string
	storeAddr string
	tagOutput bool
	timeout   time.Duration
	grace     time.Duration
	window    time.Duration // survivors' time to fail on their own
	verbose   bool
	bindTo    string   // --bind-to policy
	env       []string // NAME=VALUE from -x
	prog      string
	args      []string
}

func parseRunFlags(args []string, stderr io.Writer) (*runConfig, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, runUsage)
		fs.PrintDefaults()
	}
	cfg := &runConfig{}
	var hosts, hostFile, rsh, mapPolicy, rankTable string
	fs.StringVar(&cfg.bindTo, "bind-to", topo.BindAuto, "bind each rank to CPUs: `auto` (where hosts share a machine, each rank its share of its CPUs, at Init), none, core (one CPU per local rank) or numa (one NUMA node's CPUs); core and numa refuse more ranks than CPUs unless given as core:overload-allowed or numa:overload-allowed")
	fs.IntVar(&cfg.n, "n", 0, "number of ranks (default: one per host slot)")
	fs.StringVar(&hosts, "hosts", "", "hosts and their slots: `host[:slots],...` (default: this machine)")
	fs.StringVar(&hostFile, "host-file", "", "read hosts from `file`: one host[:slots] or \"host slots=N\" per line")
	fs.StringVar(&mapPolicy, "map-by", "slot", "rank placement: `slot` fills each host in turn, node deals ranks round-robin across hosts")
	fs.StringVar(&rankTable, "rank-table", "", "place ranks as the topology `file` (HCCL rank table or hcomm's format) says, and give it to the ranks as HCOMM_RANK_TABLE")
	fs.StringVar(&rsh, "rsh", "ssh", "`command` that runs a shell command line on a remote host: CMD HOST WORDS...")
	fs.StringVar(&cfg.storeAddr, "store-addr", "", "`host:port` for the job's store (default 127.0.0.1:0, or 0.0.0.0:0 with remote hosts)")
	fs.BoolVar(&cfg.tagOutput, "tag-output", false, "prefix every output line with \"[rank] \"")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "stop the job after this `duration`, printing the ranks' states first (0: never)")
	fs.DurationVar(&cfg.grace, "grace", defaultGrace, "how long ranks have to exit after SIGTERM before SIGKILL")
	fs.DurationVar(&cfg.window, "report-window", defaultWindow, "after a rank fails, how long the others have to notice, report and exit on their own before they are stopped (0: stop at once)")
	fs.BoolVar(&cfg.verbose, "verbose", false, "print the store's address and each rank's host and pid at start")
	fs.BoolVar(&cfg.verbose, "v", false, "short for --verbose")
	fs.Func("x", "pass the variable `NAME[=VALUE]` to every rank (repeatable); NAME alone passes the launcher's own value of NAME", func(s string) error {
		name, value, ok := strings.Cut(s, "=")
		if !validEnvName(name) {
			return fmt.Errorf("bad variable name %q", name)
		}
		if !ok {
			if value, ok = os.LookupEnv(name); !ok {
				return fmt.Errorf("%s is not set", name)
			}
		}
		cfg.env = append(cfg.env, name+"="+value)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() == 0 {
		return nil, errors.New("no program to run (hcomm run -n N -- program args...)")
	}
	cfg.prog, cfg.args = fs.Arg(0), fs.Args()[1:]
	if hosts != "" && hostFile != "" {
		return nil, errors.New("--hosts and --host-file exclude each other")
	}
	var err error
	switch {
	case hosts != "":
		cfg.hosts, err = parseHostList(hosts)
	case hostFile != "":
		var data []byte
		if data, err = os.ReadFile(hostFile); err == nil {
			cfg.hosts, err = parseHostFile(data)
			if err == nil && len(cfg.hosts) == 0 {
				err = errors.New("no hosts")
			}
		}
		if err != nil {
			err = fmt.Errorf("--host-file %s: %w", hostFile, err)
		}
	}
	if err == nil && rankTable != "" {
		if len(cfg.hosts) > 0 {
			return nil, errors.New("--rank-table excludes --hosts and --host-file")
		}
		var abs string
		if cfg.hosts, abs, err = rankTableHosts(rankTable, cfg.n); err == nil {
			cfg.env = append(cfg.env, "HCOMM_RANK_TABLE="+abs)
		}
	}
	if err == nil {
		cfg.hosts, err = mapBy(mapPolicy, cfg.hosts)
	}
	if err == nil {
		// Checked here, so that a bad policy fails before any rank starts.
		_, err = topo.Bind(cfg.bindTo, topo.Machine{}, []int{0}, 0, 1)
	}
	if err != nil {
		return nil, err
	}
	if len(cfg.hosts) == 0 && cfg.n == 0 {
		return nil, errors.New("-n is required without --hosts or --host-file")
	}
	if cfg.rsh = strings.Fields(rsh); len(cfg.rsh) == 0 {
		return nil, errors.New("--rsh is empty")
	}
	if cfg.timeout < 0 || cfg.grace < 0 || cfg.window < 0 {
		return nil, errors.New("--timeout, --grace and --report-window must not be negative")
	}
	return cfg, nil
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// runCmd runs `hcomm run` with the process's signals and returns the exit
// status.
func runCmd(args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	return runJob(args, stdout, stderr, sigs)
}

// runJob runs `hcomm run`, taking the signals to pass on to the ranks from
// signals, and returns the exit status.
func runJob(args []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	cfg, err := parseRunFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = checkSupported()
	}
	var places []placement
	if err == nil {
		places, err = assign(cfg.hosts, cfg.n, isLocalHost)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hcomm run: %v\n", err)
		return exitUsage
	}
	j := newJob(cfg, places, stdout, stderr)
	if err := j.serveStore(); err != nil {
		j.logf("%v", err)
		return exitLaunchFailed
	}
	defer j.server.Close()
	return j.run(signals)
}

func checkSupported() error {
	if !launcherSupported {
		return errors.New("hcomm run needs Linux")
	}
	return nil
}

// job is one run of hcomm run.
type job struct {
	cfg    *runConfig
	places []placement
	stdout *syncWriter
	stderr *syncWriter

	token    string // HCOMM_TOKEN
	server   *store.Server
	storeURL string // HCOMM_STORE
	dialAddr string // where the launcher itself reaches the store

	remoteProg string   // the program as remote ranks name it
	remoteEnv  []string // NAME=VALUE passed to every remote rank
	self       string   // this machine's host name, for messages

	ranks    []*rankProc   // started ranks
	machine  *topo.Machine // this machine, read for --bind-to
	allowed  []int         // the launcher's CPUs, for --bind-to
	pipes    []*os.File    // read ends of the ranks' output pipes
	copiers  sync.WaitGroup
	stopping bool
}

// rankProc is a started rank.
type rankProc struct {
	placement
	cmd     *exec.Cmd
	pid     int
	running bool // started and not yet reaped
}

func newJob(cfg *runConfig, places []placement, stdout, stderr io.Writer) *job {
	j := &job{cfg: cfg, places: places, stdout: &syncWriter{w: stdout}, stderr: &syncWriter{w: stderr}}
	j.self, _ = os.Hostname()
	if j.self == "" {
		j.self = "localhost"
	}
	j.remoteProg = cfg.prog
	if strings.Contains(cfg.prog, "/") && !filepath.IsAbs(cfg.prog) {
		if abs, err := filepath.Abs(cfg.prog); err == nil {
			j.remoteProg = abs
		}
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "HCOMM_") && !isJobVar(name) {
			j.remoteEnv = append(j.remoteEnv, kv)
		}
	}
	slices.Sort(j.remoteEnv)
	j.remoteEnv = append(j.remoteEnv, cfg.env...)
	return j
}

// isJobVar reports whether the launcher sets the variable name itself.
func isJobVar(name string) bool {
	switch name {
	case "HCOMM_RANK", "HCOMM_SIZE", "HCOMM_LOCAL_RANK", "HCOMM_LOCAL_SIZE",
		"HCOMM_STORE", "HCOMM_TOKEN", "HCOMM_HOSTNAME":
		return true
	}
	return false
}

// logf prints one launcher message on standard error.
func (j *job) logf(format string, args ...any) {
	j.stderr.Write([]byte("hcomm run: " + fmt.Sprintf(format, args...) + "\n"))
}

// serveStore makes the job token and starts the job's store.
func (j *job) serveStore() error {
	tok := make([]byte, tokenBytes)
	rand.Read(tok)
	j.token = hex.EncodeToString(tok)

	anyRemote := slices.ContainsFunc(j.places, func(p placement) bool { return !p.local })
	listen, adv, err := storeEndpoint(j.cfg.storeAddr, anyRemote, firstIPv4)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(j.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := store.NewServer(store.ServerConfig{Token: j.token, Logger: log})
	if err != nil {
		return err
	}
	if err := srv.Listen(listen); err != nil {
		srv.Close()
		return fmt.Errorf("cannot serve the job's store on %s: %w", listen, err)
	}
	j.server = srv
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	if adv == "" {
		adv = host
	}
	j.storeURL = "tcp://" + net.JoinHostPort(adv, port)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	j.dialAddr = net.JoinHostPort(host, port)
	return nil
}

// storeEndpoint decides where the job's store listens and which host the
// ranks are told to reach it at ("" means the listener's own address).
// flagAddr is --store-addr; hostIP finds an address remote hosts can reach.
func storeEndpoint(flagAddr string, anyRemote bool, hostIP func() (string, error)) (listen, advertise string, err error) {
	if flagAddr == "" {
		if !anyRemote {
			return "127.0.0.1:0", "", nil
		}
		flagAddr = "0.0.0.0:0"
	}
	host, _, err := net.SplitHostPort(flagAddr)
	if err != nil {
		return "", "", fmt.Errorf("--store-addr %q: %w", flagAddr, err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return flagAddr, "", nil
	}
	if !anyRemote {
		return flagAddr, "127.0.0.1", nil
	}
	adv, err := hostIP()
	if err != nil {
		return "", "", err
	}
	return flagAddr, adv, nil
}

// firstIPv4 returns the first IPv4 address of an interface that is up and
// not a loopback.
func firstIPv4() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("this machine has no non-loopback IPv4 address for remote ranks to reach the store; set --store-addr")
}

// rankVars returns the variables that tell a rank its place in the job,
// all but the token.
func (j *job) rankVars(p placement) []string {
	vars := []string{
		"HCOMM_RANK=" + strconv.Itoa(p.rank),
		"HCOMM_SIZE=" + strconv.Itoa(len(j.places)),
		"HCOMM_LOCAL_RANK=" + strconv.Itoa(p.localRank),
		"HCOMM_LOCAL_SIZE=" + strconv.Itoa(p.localSize),
		"HCOMM_STORE=" + j.storeURL,
	}
	if !p.local {
		vars = append(vars, "HCOMM_HOSTNAME="+p.host)
	}
	switch b := j.cfg.bindTo; {
	case b == topo.BindNone:
		// Not even where hosts share a machine (Init's auto).
		vars = append(vars, "HCOMM_BIND_TO="+b)
	case b != "" && b != topo.BindAuto && !p.local:
		// The rank binds itself on its own machine (Init).
		vars = append(vars, "HCOMM_BIND_TO="+b)
	}
	return vars
}

// command returns the command that starts rank p. A remote rank's command
// reads the token from its standard input, which the caller must give it
// (tokenInput).
func (j *job) command(p placement) *exec.Cmd {
	if p.local {
		cmd := exec.Command(j.cfg.prog, j.cfg.args...)
		env := append(os.Environ(), j.cfg.env...)
		if envValue(env, "GOMAXPROCS") == "" {
			env = append(env, "GOMAXPROCS="+strconv.Itoa(rankProcs(runtime.NumCPU(), p.localSize)))
		}
		cmd.Env = append(append(env, j.rankVars(p)...), "HCOMM_TOKEN="+j.token)
		return cmd
	}
	env := append(slices.Clip(j.remoteEnv), j.rankVars(p)...)
	argv := remoteArgv(j.cfg.rsh, p.host, env, j.remoteProg, j.cfg.args)
	return exec.Command(argv[0], argv[1:]...)
}

// binding returns the CPUs rank p starts bound to under --bind-to, nil
// for none.
func (j *job) binding(p placement) ([]int, error) {
	if j.cfg.bindTo == "" || j.cfg.bindTo == topo.BindNone || j.cfg.bindTo == topo.BindAuto {
		return nil, nil
	}
	if j.machine == nil {
		m, err := topo.Probe(topo.System())
		if err != nil {
			return nil, fmt.Errorf("--bind-to %s: %w", j.cfg.bindTo, err)
		}
		if j.allowed, err = topo.AllowedCPUs(); err != nil {
			return nil, fmt.Errorf("--bind-to %s: %w", j.cfg.bindTo, err)
		}
		j.machine = &m
	}
	cpus, err := topo.Bind(j.cfg.bindTo, *j.machine, j.allowed, p.localRank, p.localSize)
	if err != nil {
		return nil, err
	}
	if j.cfg.verbose {
		j.logf("rank %d bound to CPUs %s", p.rank, topo.FormatCPUList(cpus))
	}
	return cpus, nil
}

// rankProcs is the GOMAXPROCS of each of ranks local ranks on cpus CPUs.
func rankProcs(cpus, ranks int) int {
	return max(1, cpus/max(1, ranks))
}

// envValue returns the value env gives the variable name (the last one, as
// exec.Cmd keeps), or "".
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, _ := strings.Cut(kv, "="); n == name {
			v = val
		}
	}
	return v
}

// remoteArgv returns the command line that runs prog with args and the
// environment env on host through rsh, after reading HCOMM_TOKEN from the
// standard input: rsh host IFS= read -r HCOMM_TOKEN && export HCOMM_TOKEN
// && exec env NAME=VALUE... prog args... </dev/null, every word after host
// quoted for a POSIX shell.
func remoteArgv(rsh []string, host string, env []string, prog string, args []string) []string {
	argv := make([]string, 0, len(rsh)+len(remoteTokenWords)+3+len(env)+len(args))
	argv = append(argv, rsh...)
	argv = append(argv, host)
	argv = append(argv, remoteTokenWords...)
	argv = append(argv, "exec", "env")
	for _, kv := range env {
		argv = append(argv, shellQuote(kv))
	}
	argv = append(argv, shellQuote(prog))
	for _, a := range args {
		argv = append(argv, shellQuote(a))
	}
	return append(argv, "</dev/null")
}

// remoteTokenWords is the start of a remote rank's shell command line: it
// reads the job token from the first line of standard input.
var remoteTokenWords = []string{"IFS=", "read", "-r", "HCOMM_TOKEN", "&&", "export", "HCOMM_TOKEN", "&&"}

// tokenInput returns the read end of a pipe holding the token and a
// newline, for a remote rank's standard input. The caller closes it once
// the rank's command has started.
func (j *job) tokenInput() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// The line fits in the pipe's buffer: the write does not block.
	_, err = w.WriteString(j.token + "\n")
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// shellQuote returns s as one word for a POSIX shell: unchanged when it
// consists only of characters no shell treats specially, else in single
// quotes.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range []byte(s) {
		if !(c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == ',' || c == '+' || c == '=' || c == '@' || c == '%' ||
			'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// host returns the host r runs on, for messages.
func (j *job) host(r *rankProc) string {
	if r.local {
		return j.self
	}
	return r.host
}

// start starts rank r, copies its output, and sends r to exited once its
// process has ended (without reaping it).
func (j *job) start(r *rankProc, exited chan<- *rankProc) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd := j.command(r.placement)
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = rankSysProcAttr(r.local)
	var in *os.File
	if !r.local {
		if in, err = j.tokenInput(); err == nil {
			cmd.Stdin = in
		}
	}
	var cpus []int
	if err == nil && r.local {
		cpus, err = j.binding(r.placement)
	}
	if err == nil {
		err = topo.WithCPUs(cpus, cmd.Start)
	}
	outW.Close()
	errW.Close()
	if in != nil {
		in.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	r.cmd, r.pid, r.running = cmd, cmd.Process.Pid, true
	prefix := ""
	if j.cfg.tagOutput {
		prefix = "[" + strconv.Itoa(r.rank) + "] "
	}
	j.pipes = append(j.pipes, outR, errR)
	for _, p := range []struct {
		dst io.Writer
		src *os.File
	}{{j.stdout, outR}, {j.stderr, errR}} {
		j.copiers.Go(func() {
			defer p.src.Close()
			copyLines(p.dst, p.src, prefix)
		})
	}
	go func() {
		waitExited(r.pid)
		exited <- r
	}()
	return nil
}

// run starts the ranks and supervises them until every one has exited, and
// returns the launcher's exit status.
func (j *job) run(signals <-chan os.Signal) int {
	exited := make(chan *rankProc, len(j.places))
	code := 0
	running := 0
	var graceC, windowC <-chan time.Time
	var grace, window *time.Timer
	// The states being collected before the job is stopped, and the
	// signal that stops it once they are in.
	var statesC chan []rankState
	var pendingSig syscall.Signal
	collectCtx, cancelCollect := context.WithCancel(context.Background())
	collecting := sync.WaitGroup{}
	defer func() {
		cancelCollect()
		collecting.Wait()
		if grace != nil {
			grace.Stop()
		}
		if window != nil {
			window.Stop()
		}
	}()
	terminate := func(sig syscall.Signal) {
		j.signalAll(sig)
		if grace == nil {
			grace = time.NewTimer(j.cfg.grace)
			graceC = grace.C
		}
	}
	// stop ends the job with sig, after collecting the ranks' states
	// when some are still running.
	stop := func(sig syscall.Signal) {
		j.stopping = true
		windowC = nil
		if running == 0 || statesC != nil {
			terminate(sig)
			return
		}
		pendingSig = sig
		statesC = make(chan []rankState, 1)
		collecting.Go(func() {
			statesC <- collectStates(collectCtx, j.dialAddr, j.token, len(j.places))
		})
	}

	for _, p := range j.places {
		r := &rankProc{placement: p}
		if err := j.start(r, exited); err != nil {
			j.logf("cannot start rank %d on %s: %v", p.rank, j.host(r), err)
			code = exitLaunchFailed
			j.stopping = true
			terminate(syscall.SIGTERM)
			break
		}
		j.ranks = append(j.ranks, r)
		running++
	}
	if j.cfg.verbose {
		j.logf("store %s", j.storeURL)
		for _, r := range j.ranks {
			what := "pid"
			if !r.local {
				what = "pid of rsh"
			}
			j.logf("rank %d on %s (local rank %d of %d): %s %d", r.rank, j.host(r), r.localRank, r.localSize, what, r.pid)
		}
	}
	var timeoutC <-chan time.Time
	if j.cfg.timeout > 0 && !j.stopping {
		t := time.NewTimer(j.cfg.timeout)
		defer t.Stop()
		timeoutC = t.C
	}

	for running > 0 {
		select {
		case r := <-exited:
			running--
			desc, status, failed := j.reap(r)
			if failed && !j.stopping {
				j.logf("rank %d (pid %d on %s) %s", r.rank, r.pid, j.host(r), desc)
				code = status
				j.stopping = true
				if j.cfg.window > 0 && running > 0 {
					// The survivors notice the loss on their own and
					// say so; give them a moment to.
					window = time.NewTimer(j.cfg.window)
					windowC = window.C
				} else {
					stop(syscall.SIGTERM)
				}
			}
		case <-windowC:
			windowC = nil
			j.logf("%d rank(s) still running %v after rank failure; stopping them", running, j.cfg.window)
			stop(syscall.SIGTERM)
		case states := <-statesC:
			statesC = nil
			if lines := stateLines(states); len(lines) > 0 {
				j.logf("state of the ranks before stopping them:")
				for _, l := range lines {
					j.logf("  %s", l)
				}
			}
			terminate(pendingSig)
		case s := <-signals:
			sig, ok := s.(syscall.Signal)
			if !ok {
				continue
			}
			if j.stopping && windowC != nil {
				// Waiting for the survivors of a failure: stop now.
				j.logf("received %s; passing it on to %d rank(s)", signalName(sig), running)
				stop(sig)
				continue
			}
			if j.stopping {
				j.logf("received %s while stopping; killing %d rank(s)", signalName(sig), running)
				j.signalAll(syscall.SIGKILL)
				continue
			}
			j.logf("received %s; passing it on to %d rank(s)", signalName(sig), running)
			code = exitSignalBase + int(sig)
			stop(sig)
		case <-timeoutC:
			timeoutC = nil
			if j.stopping {
				continue // already on the way down
			}
			j.logf("job timed out after %v; stopping %d rank(s)", j.cfg.timeout, running)
			code = exitTimeout
			stop(syscall.SIGTERM)
		case <-graceC:
			graceC = nil
			j.logf("%d rank(s) still running %v after being told to stop; sending SIGKILL", running, j.cfg.grace)
			j.signalAll(syscall.SIGKILL)
		}
	}
	j.drainOutput()
	if j.stopping {
		j.printReports()
	}
	j.mergeTrace()
	return code
}

// signalAll sends sig to the process group of every rank not yet reaped.
// Those groups are safe to signal: a rank that has exited stays a zombie,
// holding its group id, until reap.
func (j *job) signalAll(sig syscall.Signal) {
	for _, r := range j.ranks {
		if r.running {
			signalGroup(r.pid, sig)
		}
	}
}

// reap collects the exit status of rank r, whose process has ended, after
// killing whatever it left behind in its process group. It returns how the
// rank ended, the status the launcher would exit with for it, and whether
// that is a failure.
func (j *job) reap(r *rankProc) (desc string, status int, failed bool) {
	signalGroup(r.pid, syscall.SIGKILL)
	err := r.cmd.Wait()
	r.running = false
	ps := r.cmd.ProcessState
	if ps == nil {
		return fmt.Sprintf("could not be waited for: %v", err), exitLaunchFailed, true
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		if ps.Success() {
			return "exited with status 0", 0, false
		}
		return "failed: " + ps.String(), exitLaunchFailed, true
	}
	return describeExit(ws)
}

// describeExit explains a wait status and gives the exit status the
// launcher reports for it.
func describeExit(ws syscall.WaitStatus) (desc string, status int, failed bool) {
	switch {
	case ws.Exited():
		s := ws.ExitStatus()
		return "exited with status " + strconv.Itoa(s), s, s != 0
	case ws.Signaled():
		desc = "killed by " + signalName(ws.Signal())
		if _, known := signalNames[ws.Signal()]; known {
			desc = "killed by signal " + signalName(ws.Signal())
		}
		if ws.CoreDump() {
			desc += " (core dumped)"
		}
		return desc, exitSignalBase + int(ws.Signal()), true
	default:
		return fmt.Sprintf("ended with wait status %v", ws), exitLaunchFailed, true
	}
}

// signalName returns the conventional name of sig, such as SIGKILL.
func signalName(sig syscall.Signal) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	return "signal " + strconv.Itoa(int(sig))
}

// drainOutput waits for the ranks' output to be copied, but not forever: a
// process that escaped its rank's process group may hold a pipe open.
func (j *job) drainOutput() {
	done := make(chan struct{})
	go func() {
		j.copiers.Wait()
		close(done)
	}()
	t := time.NewTimer(outputDrainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		for _, f := range j.pipes {
			f.Close()
		}
		<-done
	}
}

// printReports prints the failure reports ranks left in the store. It is
// best effort and bounded by reportTimeout.
func (j *job) printReports() {
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	c, err := store.Dial(ctx, j.dialAddr, &store.ClientConfig{Token: j.token})
	if err != nil {
		return
	}
	defer c.Close()
	reports := make([][]byte, len(j.places))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 1024)
	for r := range reports {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// Get waits for a missing key until ctx ends: reports
			// that exist come back at once, the others time out.
			if v, err := c.Get(ctx, reportKeyPrefix+strconv.Itoa(r)); err == nil {
				reports[r] = v
			}
		})
	}
	wg.Wait()
	for r, text := range reports {
		for _, line := range reportLines(text) {
			j.logf("rank %d: %s", r, line)
		}
	}
}
