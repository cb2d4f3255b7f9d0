package topo

import (
	"runtime"
	"slices"
	"sync"
	"testing"
)

// twoSockets is a fake two-node machine: CPUs 0-3 on node 0, 4-7 on node
// 1, eth0 on node 1 and eth1 on node 0.
func twoSockets(t *testing.T) Machine {
	t.Helper()
	m, err := Probe(machine(map[string]string{"node0": "0-3", "node1": "4-7"}, map[string]map[string]string{
		"eth0": {"speed": "25000", "mtu": "9000", "operstate": "up", "device/numa_node": "1"},
		"eth1": {"speed": "10000", "mtu": "1500", "operstate": "up", "device/numa_node": "0"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func oneNode(t *testing.T) Machine {
	t.Helper()
	m, err := Probe(machine(nil, map[string]map[string]string{"eth0": {"speed": "1000", "operstate": "up"}}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBind(t *testing.T) {
	two, one := twoSockets(t), oneNode(t)
	all8 := []int{0, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name        string
		policy      string
		m           Machine
		allowed     []int
		local, size int
		want        []int
		bad         bool
	}{
		{"none", BindNone, two, all8, 0, 4, nil, false},
		{"empty is none", "", two, all8, 3, 4, nil, false},
		{"core first", BindCore, two, all8, 0, 4, []int{0}, false},
		{"core third", BindCore, two, all8, 2, 4, []int{2}, false},
		{"core within allowed", BindCore, two, []int{5, 6}, 1, 2, []int{6}, false},
		{"core refuses more ranks than CPUs", BindCore, one, []int{0, 1}, 0, 3, nil, true},
		{"core wraps when overload allowed", BindCore + ":" + Overload, one, []int{0, 1}, 3, 4, []int{1}, false},
		{"core as many ranks as CPUs", BindCore, one, []int{0, 1}, 1, 2, []int{1}, false},
		{"numa first half", BindNUMA, two, all8, 1, 4, []int{0, 1, 2, 3}, false},
		{"numa second half", BindNUMA, two, all8, 2, 4, []int{4, 5, 6, 7}, false},
		{"numa one rank", BindNUMA, two, all8, 0, 1, []int{0, 1, 2, 3}, false},
		{"numa only allowed node", BindNUMA, two, []int{5, 7}, 0, 2, []int{5, 7}, false},
		{"numa one node", BindNUMA, one, []int{0, 1, 2, 3}, 1, 2, []int{0, 1, 2, 3}, false},
		{"numa no information", BindNUMA, Machine{}, []int{1, 0}, 1, 2, []int{0, 1}, false},
		{"numa refuses more ranks than a node's CPUs", BindNUMA, two, []int{0, 1, 4, 5}, 0, 6, nil, true},
		{"numa a node full", BindNUMA, two, []int{0, 1, 4, 5, 6}, 0, 5, nil, true},
		{"numa the other node not", BindNUMA, two, []int{0, 1, 4, 5, 6}, 4, 5, []int{4, 5, 6}, false},
		{"numa overload allowed", BindNUMA + ":" + Overload, two, []int{0, 1, 4, 5}, 5, 6, []int{4, 5}, false},
		{"numa node just full", BindNUMA, two, []int{0, 1, 4, 5}, 3, 4, []int{4, 5}, false},
		{"numa no information, too many ranks", BindNUMA, Machine{}, []int{0, 1}, 0, 3, nil, true},
		{"core nothing allowed", BindCore, two, nil, 0, 1, nil, true},
		{"qualifier on none", BindNone + ":" + Overload, two, all8, 0, 1, nil, true},
		{"unknown qualifier", BindCore + ":oversubscribe", two, all8, 0, 1, nil, true},
		{"unknown policy", "socket", two, all8, 0, 1, nil, true},
		{"bad local rank", BindCore, two, all8, 4, 4, nil, true},
	}
	for _, tt := range tests {
		got, err := Bind(tt.policy, tt.m, tt.allowed, tt.local, tt.size)
		if (err != nil) != tt.bad {
			t.Errorf("%s: error %v, want error %v", tt.name, err, tt.bad)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: Bind = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPollCPUs(t *testing.T) {
	two, one := twoSockets(t), oneNode(t)
	card := func(m Machine, cpus []int, nic string) Card {
		return NewCard(m, "h", cpus, "10.0.0.1", map[string][]string{nic: {"10.0.0.1"}})
	}
	tests := []struct {
		name string
		poll string
		c    Card
		want []int
		bad  bool
	}{
		// An unbound rank pins nothing under auto: no cost.
		{"auto unbound one node", "auto", card(one, []int{0, 1, 2, 3}, "eth0"), nil, false},
		{"auto unbound two nodes", "", card(two, []int{0, 1, 2, 3, 4, 5, 6, 7}, "eth0"), nil, false},
		// Bound by --bind-to numa on node 1, near eth0.
		{"auto bound near the NIC", "auto", card(two, []int{4, 5, 6, 7}, "eth0"), []int{4, 5, 6, 7}, false},
		// Bound across nodes: the CPUs on the NIC's node.
		{"auto bound across nodes", "auto", card(two, []int{2, 3, 4, 5}, "eth1"), []int{2, 3}, false},
		{"auto bound away from the NIC", "auto", card(two, []int{0, 1}, "eth0"), []int{0, 1}, false},
		{"off", "off", card(two, []int{4}, "eth0"), nil, false},
		{"nic unbound", "nic", card(two, []int{0, 1, 2, 3, 4, 5, 6, 7}, "eth0"), []int{4, 5, 6, 7}, false},
		{"nic other node", "nic", card(two, []int{0, 1, 2, 3, 4, 5, 6, 7}, "eth1"), []int{0, 1, 2, 3}, false},
		{"nic unknown node", "nic", card(one, []int{0, 1, 2, 3}, "eth0"), []int{0, 1, 2, 3}, false},
		{"list", "1,3", card(two, []int{0, 1, 2, 3}, "eth0"), []int{1, 3}, false},
		{"list outside the rank's CPUs", "4-5", card(two, []int{0, 1, 2, 3}, "eth0"), nil, true},
	}
	for _, tt := range tests {
		p, err := ParsePoll(tt.poll)
		if err != nil {
			t.Fatalf("%s: ParsePoll(%q): %v", tt.name, tt.poll, err)
		}
		got, err := p.PollCPUs(tt.c)
		if (err != nil) != tt.bad {
			t.Errorf("%s: error %v, want error %v", tt.name, err, tt.bad)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: PollCPUs = %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, bad := range []string{"numa", "0-", ",", "x"} {
		if _, err := ParsePoll(bad); err == nil {
			t.Errorf("ParsePoll(%q) accepted", bad)
		}
	}
	for _, s := range []string{"auto", "off", "nic", "0-2,5"} {
		if p, err := ParsePoll(s); err != nil || p.String() != s {
			t.Errorf("ParsePoll(%q) = %v, %v; String %q", s, p, err, p.String())
		}
	}
}

// TestPinRealMachine pins a goroutine to one of the process's CPUs and
// reads the thread's affinity back; the other threads keep theirs.
func TestPinRealMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread affinity is Linux's")
	}
	all, err := AllowedCPUs()
	if err != nil || len(all) == 0 {
		t.Fatalf("AllowedCPUs: %v, %v", all, err)
	}
	want := all[len(all)-1:]
	var got []int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err = Pin(want); err == nil {
			got, err = ThreadCPUs()
		}
		// Returning ends the locked thread.
	}()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("pinned thread runs on %v, want %v", got, want)
	}
	var inner []int
	err = WithCPUs(want, func() error {
		var err error
		inner, err = ThreadCPUs()
		return err
	})
	if err != nil || !slices.Equal(inner, want) {
		t.Errorf("WithCPUs: thread runs on %v (%v), want %v", inner, err, want)
	}
	runtime.LockOSThread()
	after, _ := ThreadCPUs()
	runtime.UnlockOSThread()
	if !slices.Equal(after, all) {
		t.Errorf("after WithCPUs a thread runs on %v, want %v", after, all)
	}
}
