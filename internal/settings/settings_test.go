package settings

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "4194304", want: 4194304},
		{in: "1024B", want: 1024},
		{in: "1024b", want: 1024},
		{in: "512K", want: 512 << 10},
		{in: "512k", want: 512 << 10},
		{in: "512KB", want: 512 << 10},
		{in: "512KiB", want: 512 << 10},
		{in: "512Ki", want: 512 << 10},
		{in: "4M", want: 4 << 20},
		{in: " 4M ", want: 4 << 20},
		{in: "32MiB", want: 32 << 20},
		{in: "1G", want: 1 << 30},
		{in: "2T", want: 2 << 40},
		{in: "8589934591G", want: 8589934591 << 30},
		{in: "9223372036854775807", want: math.MaxInt64},
		{in: "17179869185G", bad: true}, // wraps to 1 GiB if unchecked
		{in: "8589934592G", bad: true},
		{in: "9223372036854775808", bad: true},
		{in: "", bad: true},
		{in: "B", bad: true},
		{in: "K", bad: true},
		{in: "4I", bad: true},
		{in: "4iB", bad: true},
		{in: "-1", bad: true},
		{in: "+1", bad: true},
		{in: "-1K", bad: true},
		{in: "1.5M", bad: true},
		{in: "4X", bad: true},
		{in: "0x10", bad: true},
		{in: "4MM", bad: true},
	} {
		got, err := ParseSize(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "30", want: 30 * time.Second},
		{in: "0.5", want: 500 * time.Millisecond},
		{in: "90s", want: 90 * time.Second},
		{in: "5m", want: 5 * time.Minute},
		{in: "50us", want: 50 * time.Microsecond},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "NaN", bad: true},
		{in: "nan", bad: true},
		{in: "Inf", bad: true},
		{in: "+Inf", bad: true},
		{in: "-Inf", bad: true},
		{in: "1e300", bad: true},
		{in: "1e310", bad: true},
		{in: "9223372037", bad: true}, // seconds beyond an int64 of nanoseconds
		{in: "-1", bad: true},
		{in: "-5us", bad: true},
		{in: "99999999999h", bad: true},
		{in: "soon", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParseDuration(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseDuration(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseChoices(t *testing.T) {
	for _, s := range []string{"1", "true", "ON", "yes"} {
		if b, err := ParseBool(s); !b || err != nil {
			t.Errorf("ParseBool(%q) = %v, %v", s, b, err)
		}
	}
	for _, s := range []string{"0", "false", "Off", "no"} {
		if b, err := ParseBool(s); b || err != nil {
			t.Errorf("ParseBool(%q) = %v, %v", s, b, err)
		}
	}
	if _, err := ParseBool("maybe"); err == nil {
		t.Error("ParseBool(maybe) accepted")
	}
	for in, want := range map[string]int{"": 0, "auto": 0, "1": 1, "on": 1, "0": -1, "off": -1} {
		if y, err := ParseYield(in); y != want || err != nil {
			t.Errorf("ParseYield(%q) = %d, %v; want %d", in, y, err, want)
		}
	}
	if _, err := ParseYield("sometimes"); err == nil {
		t.Error("ParseYield(sometimes) accepted")
	}
	for in, want := range map[string]string{"": "", "auto": "", "SHM": "shm", "tcp": "tcp"} {
		if tr, err := ParseTransport(in); tr != want || err != nil {
			t.Errorf("ParseTransport(%q) = %q, %v; want %q", in, tr, err, want)
		}
	}
	if _, err := ParseTransport("carrier-pigeon"); err == nil {
		t.Error("ParseTransport(carrier-pigeon) accepted")
	}
	for in, want := range map[string]string{"usr1": "USR1", "SIGUSR2": "USR2", "": ""} {
		if s, err := ParseSignal(in); s != want || err != nil {
			t.Errorf("ParseSignal(%q) = %q, %v; want %q", in, s, err, want)
		}
	}
	if _, err := ParseSignal("KILL"); err == nil {
		t.Error("ParseSignal(KILL) accepted")
	}
	if _, _, err := ParseLevel("LOUD"); err == nil {
		t.Error("ParseLevel(LOUD) accepted")
	}
	if _, off, err := ParseLevel("off"); !off || err != nil {
		t.Error("ParseLevel(off) is not off")
	}
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestLoad(t *testing.T) {
	v, err := Load(lookupIn(nil))
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	if !reflect.DeepEqual(v.Source, d.Source) || v.Timeout != DefaultTimeout || v.ConnectTimeout != DefaultConnectTimeout ||
		v.Size != 1 || v.MasterPort != "29500" || v.Debug != "WARN" {
		t.Errorf("Load of an empty environment = %+v, want the defaults %+v", v, d)
	}
	env := map[string]string{
		"HCOMM_TIMEOUT": "0", "HCOMM_ALGO": "ring", "HCOMM_BUFFSIZE": "4M", "HCOMM_DEBUG": "info",
		"HCOMM_CONNECT_TIMEOUT": "30", "HCOMM_TRANSPORT": "TCP", "HCOMM_NSOCKS": "4", "HCOMM_SHM_CMA": "1M",
		"HCOMM_YIELD": "0", "HCOMM_TCP_POLL": "0", "HCOMM_ZERO_COPY": "1M", "HCOMM_CHECKSUM": "1", "HCOMM_CHECK_RESULTS": "true",
		"HCOMM_DUMP_SIGNAL": "SIGUSR1", "HCOMM_HOSTNAME": "node7", "HCOMM_RANK": "2", "HCOMM_SIZE": "4",
		"SLURM_JOB_ID": "77", "MASTER_ADDR": "10.0.0.1", "GOMAXPROCS": "3",
	}
	v, err = Load(lookupIn(env))
	if err != nil {
		t.Fatal(err)
	}
	want := Values{Rank: 2, Size: 4, RankVars: "HCOMM_RANK,HCOMM_SIZE", Launcher: "hcomm", LocalRank: -1, MasterAddr: "10.0.0.1", MasterPort: "29500",
		JobID: "77//", Timeout: 0, Algo: "ring", ChunkBytes: 4 << 20, Debug: "INFO", ConnectTimeout: 30 * time.Second,
		Transport: "tcp", NSocks: 4, Hostname: "node7", ShmCMA: 1 << 20, ZeroCopy: 1 << 20, ZeroCopyFixed: true, Yield: -1, TCPPoll: -1, Checksum: true,
		CheckResults: true, DumpSignal: "USR1", ProcsSet: true}
	want.Source = v.Source
	if !reflect.DeepEqual(v, want) {
		t.Errorf("Load = %+v\nwant %+v", v, want)
	}
	for k := range env {
		if _, ok := Lookup(k); ok && v.Source[k] != "env" {
			t.Errorf("Source[%s] = %q, want env", k, v.Source[k])
		}
	}

	for _, kv := range [][2]string{
		{"HCOMM_TIMEOUT", "NaN"}, {"HCOMM_TIMEOUT", "1e300"}, {"HCOMM_TIMEOUT", "-1"}, {"HCOMM_TIMEOUT", "soon"},
		{"HCOMM_BUFFSIZE", "17179869185G"}, {"HCOMM_BUFFSIZE", "0"}, {"HCOMM_DEBUG", "LOUD"},
		{"HCOMM_CONNECT_TIMEOUT", "0"}, {"HCOMM_NSOCKS", "17"}, {"HCOMM_NSOCKS", "many"},
		{"HCOMM_TCP_POLL", "-5us"}, {"HCOMM_CHECKSUM", "maybe"}, {"HCOMM_DUMP_SIGNAL", "KILL"},
	} {
		if _, err := Load(lookupIn(map[string]string{kv[0]: kv[1]})); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("Load(%s=%s) = %v, want an error naming the variable", kv[0], kv[1], err)
		}
	}
	if v, _ := Load(lookupIn(map[string]string{"HCOMM_BUFFSIZE": "1024B"})); v.ChunkBytes != 1024 {
		t.Errorf("HCOMM_BUFFSIZE=1024B gives %d", v.ChunkBytes)
	}
}

func TestRankSize(t *testing.T) {
	for _, tc := range []struct {
		env        map[string]string
		rank, size int
		bad        bool
	}{
		{nil, 0, 1, false},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2"}, 1, 2, false},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8"}, 3, 8, false},
		{map[string]string{"HCOMM_RANK": "0", "HCOMM_SIZE": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, 0, 2, false},
		{map[string]string{"HCOMM_RANK": "4", "HCOMM_SIZE": "4"}, 0, 0, true},
		{map[string]string{"SLURM_PROCID": "1"}, 0, 0, true},
	} {
		v, err := Load(lookupIn(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if tc.bad != (v.RankErr != nil) || !tc.bad && (v.Rank != tc.rank || v.Size != tc.size) {
			t.Errorf("%v: rank %d size %d err %v", tc.env, v.Rank, v.Size, v.RankErr)
		}
	}
}

func TestLog(t *testing.T) {
	v, err := Load(lookupIn(map[string]string{"HCOMM_NSOCKS": "3", "HCOMM_TOKEN": "secret"}))
	if err != nil {
		t.Fatal(err)
	}
	v.Algo = "ring"
	v.Set("HCOMM_ALGO")
	var buf bytes.Buffer
	v.Log(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	out := buf.String()
	if strings.Count(out, "\n") != 1 {
		t.Errorf("Log wrote %q, want one record", out)
	}
	for _, s := range []string{`HCOMM_NSOCKS="3 (env)"`, `HCOMM_ALGO="ring (config)"`, "HCOMM_TIMEOUT=10m0s", "HCOMM_TRANSPORT=auto"} {
		if !strings.Contains(out, s) {
			t.Errorf("Log output lacks %s:\n%s", s, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("Log shows the token:\n%s", out)
	}
	for _, d := range Table {
		if d.Scope == Library && d.Name != "HCOMM_ALGO" && d.Name != "HCOMM_STORE" && d.Name != "MASTER_ADDR" &&
			d.Name != "HCOMM_SOCKET_ADDR" && d.Name != "HCOMM_SOCKET_IFNAME" && d.Name != "HCOMM_HOSTNAME" &&
			d.Name != "HCOMM_DUMP_SIGNAL" && d.Name != "HCOMM_RANK_TABLE" && d.show(&v) == "" {
			t.Errorf("%s has no shown value", d.Name)
		}
	}
	buf.Reset()
	v.Log(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if buf.Len() != 0 {
		t.Errorf("Log wrote at WARN level: %q", buf.String())
	}
}

func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Table {
		if seen[d.Name] {
			t.Errorf("%s declared twice", d.Name)
		}
		seen[d.Name] = true
		if d.Doc == "" {
			t.Errorf("%s has no doc", d.Name)
		}
		if d.Scope == Library && d.parse == nil && d.Name != "HCOMM_RANK" && d.Name != "HCOMM_SIZE" {
			t.Errorf("%s is read by the library but has no parser", d.Name)
		}
		if d.Scope == Library && d.show == nil {
			t.Errorf("%s is read by the library but cannot be shown", d.Name)
		}
		// A documented default must be a value the parser accepts.
		if d.parse != nil && d.Default != "" {
			v := Defaults()
			if err := d.parse(&v, d.Default); err != nil {
				t.Errorf("%s: default %q does not parse: %v", d.Name, d.Default, err)
			}
		}
	}
}

var (
	rowRE   = regexp.MustCompile("^\\| (`[^|]*) \\| ([^|]*) \\|")
	nameRE  = regexp.MustCompile("`([A-Z][A-Z0-9_]*\\*?)`")
	fieldRE = regexp.MustCompile("`([A-Za-z]+)`")
	envRE   = regexp.MustCompile(`HCOMM_[A-Z0-9_]*\*?`)
)

// TestReadme holds the README's variable table to Table, both ways: every
// row's variables are declared with the Config fields the row names, every
// declared variable outside the test suites has a row, and every HCOMM_
// name the README mentions anywhere is declared.
func TestReadme(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	_, table, ok := strings.Cut(text, "| variable | Config field |")
	if !ok {
		t.Fatal("README.md has no variable table")
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(table, "\n")[2:] {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			break
		}
		var fields []string
		for _, f := range fieldRE.FindAllStringSubmatch(m[2], -1) {
			fields = append(fields, f[1])
		}
		var declared []string
		for _, n := range nameRE.FindAllStringSubmatch(m[1], -1) {
			name := n[1]
			rows[name] = true
			d, ok := Lookup(name)
			if !ok {
				t.Errorf("README row %s: not in the settings table", name)
				continue
			}
			if d.Field != "" {
				declared = append(declared, d.Field)
			}
		}
		slices.Sort(fields)
		slices.Sort(declared)
		fields = slices.Compact(fields)
		if !slices.Equal(fields, slices.Compact(declared)) {
			t.Errorf("README row %s: Config fields %v, the settings table says %v", m[1], fields, declared)
		}
	}
	for _, d := range Table {
		switch {
		case d.Scope != Test && !rows[d.Name]:
			t.Errorf("%s: no row in the README's variable table", d.Name)
		case d.Scope == Test && !strings.Contains(text, d.Name):
			t.Errorf("%s: not mentioned in the README", d.Name)
		}
	}
	for _, name := range envRE.FindAllString(text, -1) {
		if _, ok := Lookup(name); ok {
			continue
		}
		found := false
		for _, d := range Table {
			if p, ok := strings.CutSuffix(d.Name, "*"); ok && strings.HasPrefix(name, p) {
				found = true
			}
		}
		if !found && !strings.HasSuffix(name, "_") {
			t.Errorf("README mentions %s, which the settings table does not declare", name)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "1024B", "4M", "17179869185G", "512KiB", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err == nil && v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "30", "90s", "NaN", "1e300", "-1", "50us"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
	})
}

func TestTopologyVars(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	v, err := Load(env(map[string]string{"RANK_TABLE_FILE": "/etc/hccl.json", "HCOMM_TOPOLOGY": "OFF"}))
	if err != nil || v.RankTable != "/etc/hccl.json" || v.Topology != "off" {
		t.Fatalf("RANK_TABLE_FILE, HCOMM_TOPOLOGY=OFF: %+v, %v", v, err)
	}
	v, _ = Load(env(map[string]string{"RANK_TABLE_FILE": "/b", "HCOMM_RANK_TABLE": "/a"}))
	if v.RankTable != "/a" || v.Topology != "" {
		t.Errorf("HCOMM_RANK_TABLE does not win over RANK_TABLE_FILE: %q", v.RankTable)
	}
	if _, err := Load(env(map[string]string{"HCOMM_TOPOLOGY": "sometimes"})); err == nil {
		t.Error("HCOMM_TOPOLOGY=sometimes accepted")
	}
}

// TestLaunchers is each launcher's set of variables, as it provides them,
// against the rank, size and local rank Load reads from it.
func TestLaunchers(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		env                   map[string]string
		rank, size, localRank int
		launcher              string
	}{
		{"none", nil, 0, 1, -1, ""},
		{"hcomm run", map[string]string{"HCOMM_RANK": "3", "HCOMM_SIZE": "4", "HCOMM_LOCAL_RANK": "1", "HCOMM_LOCAL_SIZE": "2"}, 3, 4, 1, "hcomm"},
		{"torchrun", map[string]string{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "n0"}, 5, 8, 1, "torchrun"},
		{"mpirun (Open MPI)", map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, 2, 4, 0, "Open MPI"},
		{"srun", map[string]string{"SLURM_PROCID": "6", "SLURM_NTASKS": "16", "SLURM_LOCALID": "2", "SLURM_JOB_ID": "77"}, 6, 16, 2, "Slurm"},
		// MPICH's hydra sets PMI_RANK/PMI_SIZE and MPI_LOCALRANKID.
		{"mpiexec (hydra)", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "3", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}, 1, 3, 1, "PMI"},
		{"PMI with PMI_LOCAL_RANK", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2", "PMI_LOCAL_RANK": "0", "MPI_LOCALRANKID": "1"}, 0, 2, 0, "PMI"},
		{"Kubernetes Indexed Job", map[string]string{"JOB_COMPLETION_INDEX": "3", "HCOMM_SIZE": "4", "MASTER_ADDR": "job-0.svc"}, 3, 4, -1, "Kubernetes"},
		// hcomm's own pair wins over the launcher's beneath it.
		{"hcomm run under srun", map[string]string{"HCOMM_RANK": "1", "HCOMM_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, 1, 2, -1, "hcomm"},
		{"HCOMM_RANK over the index", map[string]string{"HCOMM_RANK": "0", "HCOMM_SIZE": "2", "JOB_COMPLETION_INDEX": "1"}, 0, 2, -1, "hcomm"},
		{"local rank out of range", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "9"}, 0, 2, -1, "PMI"},
	} {
		v, err := Load(lookupIn(tc.env))
		if err != nil || v.RankErr != nil {
			t.Errorf("%s: %v %v", tc.name, err, v.RankErr)
			continue
		}
		if v.Rank != tc.rank || v.Size != tc.size || v.LocalRank != tc.localRank || v.Launcher != tc.launcher {
			t.Errorf("%s: rank %d size %d local rank %d launcher %q, want %d %d %d %q",
				tc.name, v.Rank, v.Size, v.LocalRank, v.Launcher, tc.rank, tc.size, tc.localRank, tc.launcher)
		}
	}
	for _, env := range []map[string]string{
		{"JOB_COMPLETION_INDEX": "2"}, // no size
		{"JOB_COMPLETION_INDEX": "4", "HCOMM_SIZE": "4"},
		{"PMI_RANK": "0"},
		{"PMI_RANK": "x", "PMI_SIZE": "2"},
		{"HCOMM_SIZE": "4"},
	} {
		v, err := Load(lookupIn(env))
		if err != nil {
			t.Fatal(err)
		}
		if v.RankErr == nil {
			t.Errorf("%v: no error (rank %d size %d)", env, v.Rank, v.Size)
		}
	}
}

// TestKubernetesManifest holds examples/kubernetes/indexed-job.yaml to the
// contract its README states: every pod, given its JOB_COMPLETION_INDEX,
// reads its rank, the job's size and rank 0's address through the
// headless Service.
func TestKubernetesManifest(t *testing.T) {
	b, err := os.ReadFile("../../examples/kubernetes/indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	field := func(key string) string {
		m := regexp.MustCompile(`(?m)^\s*` + key + `:\s*"?([^"\s#]+)`).FindStringSubmatch(y)
		if m == nil {
			t.Fatalf("no %s in the manifest", key)
		}
		return m[1]
	}
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*- name: (\w+).*\n\s*(value: "?([^"\n]*)"?|valueFrom:)`).FindAllStringSubmatch(y, -1) {
		env[m[1]] = m[3]
		if m[3] == "" {
			env[m[1]] = "(from a secret)"
		}
	}
	if field("completionMode") != "Indexed" || field("clusterIP") != "None" || field("publishNotReadyAddresses") != "true" {
		t.Error("the manifest is not an Indexed Job with a headless Service that publishes unready pods")
	}
	n := field("completions")
	if field("parallelism") != n || env["HCOMM_SIZE"] != n {
		t.Errorf("completions %s, parallelism %s, HCOMM_SIZE %s differ", n, field("parallelism"), env["HCOMM_SIZE"])
	}
	named := func(kind string) string {
		return regexp.MustCompile(`(?s)kind: ` + kind + `\n.*?name:\s*(\S+)`).FindStringSubmatch(y)[1]
	}
	if want := named("Job") + "-0." + named("Service"); field("subdomain") != named("Service") || env["MASTER_ADDR"] != want {
		t.Errorf("MASTER_ADDR %q: want rank 0's name through the Service, %q", env["MASTER_ADDR"], want)
	}
	size, _ := strconv.Atoi(n)
	for i := range size {
		env["JOB_COMPLETION_INDEX"] = strconv.Itoa(i)
		v, err := Load(lookupIn(env))
		if err != nil || v.RankErr != nil {
			t.Fatalf("pod %d: %v %v", i, err, v.RankErr)
		}
		if v.Rank != i || v.Size != size || v.Launcher != "Kubernetes" || v.MasterAddr == "" || v.MasterPort != env["MASTER_PORT"] || v.Token == "" {
			t.Errorf("pod %d reads rank %d size %d launcher %q master %s:%s", i, v.Rank, v.Size, v.Launcher, v.MasterAddr, v.MasterPort)
		}
	}
}

// HCOMM_ZERO_COPY: auto (the default) is 256 KiB with the measured rule,
// a size is that size at every size, off is off.
func TestZeroCopyForms(t *testing.T) {
	for _, tc := range []struct {
		set   string // "": unset
		n     int
		fixed bool
		show  string
	}{
		{"", DefaultZeroCopy, false, "auto"},
		{"auto", DefaultZeroCopy, false, "auto"},
		{"256K", 256 << 10, true, "262144"},
		{"1", 1, true, "1"},
		{"off", 0, false, "off"},
		{"0", 0, true, "off"},
	} {
		v, err := Load(func(name string) (string, bool) {
			if name == "HCOMM_ZERO_COPY" && tc.set != "" {
				return tc.set, true
			}
			return "", false
		})
		if err != nil {
			t.Fatalf("%q: %v", tc.set, err)
		}
		zc, _ := Lookup("HCOMM_ZERO_COPY")
		if v.ZeroCopy != tc.n || (v.ZeroCopy > 0 && v.ZeroCopyFixed != tc.fixed) || zc.show(&v) != tc.show {
			t.Errorf("HCOMM_ZERO_COPY=%q: %d fixed %v (%s), want %d fixed %v (%s)", tc.set, v.ZeroCopy, v.ZeroCopyFixed, zc.show(&v), tc.n, tc.fixed, tc.show)
		}
	}
}
