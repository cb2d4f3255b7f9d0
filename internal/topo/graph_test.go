package topo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hcomm-go/hcomm/store"
)

// cardsOn returns cards for ranks placed on hosts by hostOf, each host
// named hN with address 10.0.0.N+1 and NICs eth0 and lo; ranks alternate
// between NUMA nodes 0 and 1 in pairs (ranks 0,1 on 0, 2,3 on 1, …).
func cardsOn(hostOf []int) []Card {
	cards := make([]Card, len(hostOf))
	for r, h := range hostOf {
		cards[r] = Card{Host: fmt.Sprintf("h%d/net:[1]/boot", h), Hostname: fmt.Sprintf("h%d", h),
			Addrs: []string{fmt.Sprintf("10.0.0.%d", h+1)}, NUMA: (r / 2) % 2, CPUs: []int{(r / 2) % 2},
			Nodes: []Node{{0, []int{0}}, {1, []int{1}}},
			NICs:  []NIC{{Name: "eth0", SpeedMbps: 10000, MTU: 1500, NUMA: 0, Up: true}, {Name: "lo", MTU: 65536, NUMA: -1, Up: true}}}
	}
	return cards
}

func TestBuildDiscovery(t *testing.T) {
	// Interleaved placement: ranks 0,2,4 on h0, 1,3,5 on h1.
	topo, err := Build(cardsOn([]int{0, 1, 0, 1, 0, 1}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.HostRanks(); !reflect.DeepEqual(got, [][]int{{0, 4, 2}, {1, 5, 3}}) {
		t.Errorf("HostRanks = %v", got)
	}
	ring := topo.RingOrder()
	if got := topo.Crossings(ring); got != 2 {
		t.Errorf("ring %v crosses %d host boundaries, want 2", ring, got)
	}
	if got := topo.Crossings([]int{0, 1, 2, 3, 4, 5}); got != 6 {
		t.Errorf("rank order crosses %d, want 6", got)
	}
	for _, tt := range []struct {
		a, b int
		want Level
	}{{0, 0, Self}, {0, 4, SameNUMA}, {0, 2, SameHost}, {0, 1, Remote}} {
		if got := topo.Level(tt.a, tt.b); got != tt.want {
			t.Errorf("Level(%d,%d) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	if topo.Flat() {
		t.Error("2 hosts × 3 ranks is flat")
	}
	if got := topo.SharedMachines(); got != nil {
		t.Errorf("hosts of different machines share a kernel: %v", got)
	}
	var sb strings.Builder
	topo.Format(&sb)
	for _, want := range []string{"6 ranks on 2 hosts", "ring: 0 4 2 1 5 3 (2 host crossings; rank order crosses 6)", "nic eth0: 10000 Mb/s"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Format lacks %q:\n%s", want, sb.String())
		}
	}
}

// TestSharedMachines: namespaces of one machine (one boot id, network
// namespaces of their own) are hosts of their own that share a kernel.
func TestSharedMachines(t *testing.T) {
	cards := cardsOn([]int{0, 0, 1, 1, 2, 2})
	for r := range cards {
		// Hosts h0 and h2 are namespaces of machine m1, h1 runs alone;
		// every rank may run on both CPUs.
		cards[r].Machine = []string{"m1-boot-id", "m2-boot-id", "m1-boot-id"}[r/2]
		cards[r].CPUs = []int{0, 1}
	}
	topo, err := Build(cards, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Hosts) != 3 || topo.Level(0, 4) != Remote {
		t.Fatalf("namespaces of one machine are not hosts of their own: %d hosts, level %v", len(topo.Hosts), topo.Level(0, 4))
	}
	if got := topo.SharedMachines(); !reflect.DeepEqual(got, [][]int{{0, 2}}) {
		t.Errorf("SharedMachines = %v, want [[0 2]]", got)
	}
	// Machine m1 runs 4 ranks on its 2 CPUs; m2 2 on 2.
	if got := topo.Crowd(); got != 2 {
		t.Errorf("Crowd = %v, want 2 (4 ranks of hosts h0 and h2 on one kernel's 2 CPUs)", got)
	}
	// The ranks' affinity, not the machine, gives the CPUs: a cpuset that
	// allows m1's four ranks CPU 0 only puts four ranks on one CPU.
	for _, r := range []int{0, 1, 4, 5} {
		cards[r].CPUs = []int{0}
	}
	pinned, err := Build(cards, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pinned.Crowd(); got != 4 {
		t.Errorf("Crowd = %v, want 4 (4 ranks allowed CPU 0 only)", got)
	}
	// Ranks bound one to a CPU: host h1's two ranks on CPUs 0 and 1.
	cards[2].CPUs, cards[3].CPUs = []int{0}, []int{1}
	for _, tt := range []struct {
		unknown bool
		want    float64
	}{{false, 4}, {true, 2}} {
		if tt.unknown {
			// Masks not known: the CPUs of the nodes count.
			for _, r := range []int{0, 1, 4, 5} {
				cards[r].CPUs = nil
			}
		}
		b, err := Build(cards, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Crowd(); got != tt.want {
			t.Errorf("masks unknown %v: Crowd = %v, want %v", tt.unknown, got, tt.want)
		}
	}
	aloneCards := cardsOn([]int{0, 0, 1, 1})
	for r := range aloneCards {
		aloneCards[r].CPUs = []int{r % 2}
	}
	alone, err := Build(aloneCards, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := alone.Crowd(); got != 1 {
		t.Errorf("Crowd of hosts with kernels of their own = %v, want 1", got)
	}
	var sb strings.Builder
	topo.Format(&sb)
	if want := "hosts h0/net:[1]/boot, h2/net:[1]/boot share one kernel (boot id m1-boot-): namespaces or containers of one machine, 4 ranks on its CPUs"; !strings.Contains(sb.String(), want) {
		t.Errorf("Format lacks %q:\n%s", want, sb.String())
	}
}

func mustParse(t *testing.T, name, text string) *File {
	t.Helper()
	f, err := Parse(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBuildFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "native.topo"))
	if err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, "native.topo", string(b))
	if f.Links != (Links{Intra: 200, Inter: 25, Group: 100}) {
		t.Errorf("links %+v", f.Links)
	}
	hostOf := make([]int, 16)
	for r := range hostOf {
		hostOf[r] = r % 4
	}
	// The file names hosts n0..n3, labels no rank answers to: only the
	// partition is checked.
	topo, err := Build(cardsOn(hostOf), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Groups) != 2 || topo.Level(0, 1) != SameGroup || topo.Level(0, 2) != Remote {
		t.Errorf("groups %v, level(0,1) %v, level(0,2) %v", topo.Groups, topo.Level(0, 1), topo.Level(0, 2))
	}
	if got := topo.Crossings(topo.RingOrder()); got != 4 {
		t.Errorf("ring crosses %d", got)
	}

	rt, err := os.ReadFile(filepath.Join("testdata", "hccl_v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	f = mustParse(t, "hccl.json", string(rt))
	topo, err = Build(cardsOn([]int{0, 0, 1, 1}), f)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Hosts[0].Name != "node_0" || !slices.Equal(topo.Hosts[1].Ranks, []int{2, 3}) || !strings.HasPrefix(topo.Source, "rank table") {
		t.Errorf("hosts %+v source %q", topo.Hosts, topo.Source)
	}

	sp, err := os.ReadFile(filepath.Join("testdata", "hccl_superpod.json"))
	if err != nil {
		t.Fatal(err)
	}
	f = mustParse(t, "sp.json", string(sp))
	topo, err = Build(cardsOn([]int{0, 0, 1, 1, 2, 2, 3, 3}), f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(topo.Groups, []string{"0", "1"}) || topo.Level(0, 2) != SameGroup || topo.Level(0, 4) != Remote {
		t.Errorf("super pods: groups %v", topo.Groups)
	}
}

func TestBuildContradictions(t *testing.T) {
	tests := []struct {
		name   string
		hostOf []int
		file   string
		want   string
	}{
		{"size mismatch", []int{0, 0, 1}, "host a ranks 0-1\nhost b ranks 2-3\n", "lists rank 3 but the job has 3 ranks"},
		{"missing ranks", []int{0, 0, 1, 1, 1}, "host a ranks 0-1\nhost b ranks 2-3\n", "missing ranks 4"},
		{"split host", []int{0, 0, 1, 1}, "host a ranks 0\nhost b ranks 1-3\n", "ranks 0 and 1 run on one host"},
		{"merged hosts", []int{0, 0, 1, 1}, "host a ranks 0-3\n", "ranks 0 and 2 are placed on host a but run on different hosts"},
		{"wrong host", []int{0, 0, 1, 1}, "host h1 ranks 0-1\nhost h0 ranks 2-3\n", "rank 0 is placed on host h1 but runs on h0"},
		{"wrong address", []int{0, 0, 1, 1}, "host 10.0.0.2 ranks 0-1\nhost x ranks 2-3\n", "rank 0 is placed on host 10.0.0.2"},
		{"unknown host", []int{0, 0, 1, 1}, "host h0 ranks 0-1\nhost h7 ranks 2-3\n", "host h7 is not a host of this job"},
		{"unknown nic", []int{0, 0, 1, 1}, "host h0 ranks 0-1 nic ib0\nhost h1 ranks 2-3\n", `names NIC "ib0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("f", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Build(cardsOn(tt.hostOf), f)
			var te *Error
			if !errors.As(err, &te) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build error %v, want a *topo.Error containing %q", err, tt.want)
			}
		})
	}
	// A device_ip that is not a host address (an accelerator NIC's, as in
	// HCCL's clusters) is no contradiction.
	if f, err := Parse("f", []byte(`{"version":"1.0","server_list":[{"server_id":"h0","device":[{"rank_id":"0","device_ip":"192.168.100.1"}]},{"server_id":"h1","device":[{"rank_id":"1"}]}]}`)); err != nil {
		t.Fatal(err)
	} else if _, err := Build(cardsOn([]int{0, 1}), f); err != nil {
		t.Errorf("a rank table whose device_ip is an accelerator's address: %v", err)
	}
	// Good names pass: host names and addresses.
	for _, file := range []string{"host h0 ranks 0-1\nhost h1 ranks 2-3\n", "host 10.0.0.1 ranks 0-1\nhost 10.0.0.2 ranks 2-3 nic eth0\n"} {
		if _, err := Build(cardsOn([]int{0, 0, 1, 1}), mustParse(t, "f", file)); err != nil {
			t.Errorf("%q: %v", file, err)
		}
	}
	// Ranks that read different files (or one none) fail alike.
	cards := cardsOn([]int{0, 1})
	cards[1].File = "abc"
	if _, err := Build(cards, nil); err == nil || !strings.Contains(err.Error(), "different topology files") {
		t.Errorf("different files: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ file, want string }{
		{"", "no hosts"},
		{"host", "host without a name"},
		{"host a", "neither ranks nor slots"},
		{"host a ranks", "needs a value"},
		{"host a ranks x", "bad rank list"},
		{"host a slots 0", "bad slot count"},
		{"host a ranks 0 slots 1", "both ranks and slots"},
		{"host a ranks 0\nhost a ranks 1", "appears twice"},
		{"host a ranks 0-1\nhost b ranks 1", "rank 1 is listed twice"},
		{"host a ranks 1", "not rank 0"},
		{"host a ranks 0 color red", "unknown host attribute"},
		{"host a ranks 0 nic ,", "empty NIC name"},
		{"link inter", "want: link"},
		{"link inter fast", "bad link speed"},
		{"link side 10", "unknown link class"},
		{"rack a", "unknown statement"},
		{`{"version":"3.0","server_list":[]}`, "version"},
		{`{"server_list":[]}`, "no version"},
		{`{"version":"1.0","status":"initializing","server_list":[]}`, "status"},
		{`{"version":"1.0","server_list":[]}`, "no server_list"},
		{`{"version":"1.0","server_count":"2","server_list":[{"server_id":"a","device":[{"rank_id":"0"}]}]}`, "server_count is 2"},
		{`{"version":"1.0","server_list":[{"server_id":"a","device":[{"rank_id":"x"}]}]}`, "not a rank table"},
		{`{"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":"0"}]}]}`, "no rank_id"},
		{`{"version":"1.0","server_list":[{"device":[{"rank_id":"0"}]}]}`, "no server_id"},
		{`{"version":"1.0","server_list":[{"server_id":"a","device":[]}]}`, "no devices"},
		{`{"version":"1.0","server_list":[{"server_id":"a","device":[{"rank_id":"0"}]},{"server_id":"a","device":[{"rank_id":"1"}]}]}`, "appears twice"},
		{`{"version":"1.0","server_list":[{"server_id":"a","device":[{"rank_id":"0"},{"rank_id":0}]}]}`, "listed twice"},
		{`{"version":"2.0","server_list":[{"server_id":"a","device":[{"rank_id":"0"}]}],"super_pod_list":[{"super_pod_id":"p","server_list":[{"server_id":"b"}]}]}`, "not in server_list"},
		{`{"version":"1.0","server_list":[{"server_id":"a","device":[{"rank_id":"0"}]}]} {}`, "after the JSON"},
	}
	for _, tt := range tests {
		_, err := Parse("f", []byte(tt.file))
		var te *Error
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error %v, want one containing %q", tt.file, err, tt.want)
		}
	}
	f, err := ParseFile([]byte("host a slots 2\nhost b slots 3 group g\nhost c ranks 5-6\nhost d slots 1\nlink intra 400mbit\n"))
	if err != nil || !slices.Equal(f.Hosts[1].Ranks, []int{2, 3, 4}) || !slices.Equal(f.Hosts[3].Ranks, []int{7}) || f.Links.Intra != 0.4 {
		t.Errorf("slots: %+v, %v", f, err)
	}
}

func TestExchange(t *testing.T) {
	st, err := store.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 4
	in := cardsOn([]int{0, 1, 0, 1})
	got := make([][]Card, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			got[r], errs[r] = Exchange(context.Background(), store.WithPrefix(st, "job"), r, n, in[r])
		})
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil {
			t.Fatal(errs[r])
		}
		if !reflect.DeepEqual(got[r], got[0]) {
			t.Fatalf("rank %d holds other cards than rank 0", r)
		}
	}
	if !reflect.DeepEqual(got[0], in) {
		t.Fatalf("exchanged cards differ from the published ones")
	}
	// A peer that publishes garbage is an error, not a panic.
	if err := st.Set(context.Background(), "bad/topo/1", []byte{1, 200}); err != nil {
		t.Fatal(err)
	}
	if _, err := Exchange(context.Background(), store.WithPrefix(st, "bad"), 0, 2, in[0]); err == nil || !strings.Contains(err.Error(), "rank 1's card") {
		t.Fatalf("garbage card: %v", err)
	}
}

// TestLeadersApart: hosts that share a kernel get first ranks (the leader
// forms' leaders) bound to different CPUs when the ranks are bound; ranks
// free to run anywhere, and hosts on kernels of their own, keep their
// order.
func TestLeadersApart(t *testing.T) {
	for _, tt := range []struct {
		name     string
		machines []string // per host
		cpus     [][]int  // per rank
		want     [][]int
	}{
		{"bound, one kernel", []string{"m", "m"}, [][]int{{0}, {1}, {0}, {1}}, [][]int{{0, 1}, {3, 2}}},
		{"bound apart already", []string{"m", "m"}, [][]int{{0}, {1}, {1}, {0}}, [][]int{{0, 1}, {2, 3}}},
		{"unbound, one kernel", []string{"m", "m"}, [][]int{{0, 1}, {0, 1}, {0, 1}, {0, 1}}, [][]int{{0, 1}, {2, 3}}},
		{"bound, own kernels", []string{"m1", "m2"}, [][]int{{0}, {1}, {0}, {1}}, [][]int{{0, 1}, {2, 3}}},
		{"masks unknown", []string{"m", "m"}, [][]int{nil, nil, nil, nil}, [][]int{{0, 1}, {2, 3}}},
	} {
		cards := cardsOn([]int{0, 0, 1, 1})
		for r := range cards {
			cards[r].Machine = tt.machines[r/2]
			cards[r].CPUs = tt.cpus[r]
			cards[r].NUMA = 0
		}
		topo, err := Build(cards, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := topo.HostRanks(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: HostRanks = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Three hosts of three ranks on a 3-CPU kernel, bound by local rank:
	// each host's first rank on its own CPU, rings kept cyclic.
	cards := cardsOn([]int{0, 0, 0, 1, 1, 1, 2, 2, 2})
	for r := range cards {
		cards[r].Machine, cards[r].CPUs, cards[r].NUMA = "m", []int{r % 3}, 0
		cards[r].Nodes = []Node{{0, []int{0, 1, 2}}}
	}
	topo, err := Build(cards, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topo.HostRanks(), [][]int{{0, 1, 2}, {4, 5, 3}, {8, 6, 7}}; !reflect.DeepEqual(got, want) {
		t.Errorf("3 x 3 bound: HostRanks = %v, want %v", got, want)
	}
}
