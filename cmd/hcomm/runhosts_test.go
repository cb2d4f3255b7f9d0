package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseHostList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []hostSlots
		err  string
	}{
		{in: "a", want: []hostSlots{{"a", 1}}},
		{in: "a:2,b:2", want: []hostSlots{{"a", 2}, {"b", 2}}},
		{in: " node-1.example.com:8 , user@n2 ", want: []hostSlots{{"node-1.example.com", 8}, {"user@n2", 1}}},
		{in: "[::1]:4,[fe80::1%eth0]", want: []hostSlots{{"::1", 4}, {"fe80::1%eth0", 1}}},
		{in: "10.0.0.1:3", want: []hostSlots{{"10.0.0.1", 3}}},
		{in: "", err: "empty entry"},
		{in: "a,,b", err: "empty entry"},
		{in: "a:", err: `slots ""`},
		{in: "a:0", err: `slots "0"`},
		{in: "a:-2", err: `slots "-2"`},
		{in: "a:99999999", err: `slots "99999999"`},
		{in: "fe80::1", err: "brackets"},
		{in: "[::1", err: "missing ]"},
		{in: "[::1]x", err: "want [address]:slots"},
		{in: ":3", err: "empty host name"},
		{in: "-oProxyCommand=evil", err: "must not start with '-'"},
		{in: "a b", err: "invalid character"},
		{in: "a;rm", err: "invalid character"},
	} {
		got, err := parseHostList(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseHostList(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseHostList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseHostFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []hostSlots
		err  string
	}{
		{name: "empty", in: ""},
		{name: "comments", in: "# hosts\n\n   # more\n"},
		{name: "forms", in: "a\nb:2\nc slots=3   # three\n  d   slots=4\r\n[::1] slots=2\n",
			want: []hostSlots{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}, {"::1", 2}}},
		{name: "duplicate", in: "a:1\na:1\n", want: []hostSlots{{"a", 1}, {"a", 1}}},
		{name: "twice", in: "a:2 slots=3\n", err: "line 1: slots given twice"},
		{name: "twice2", in: "a slots=2 slots=3\n", err: "line 1: slots given twice"},
		{name: "unknown", in: "a\nb max_slots=3\n", err: `line 2: unknown field "max_slots=3"`},
		{name: "badslots", in: "a slots=x\n", err: `line 1: slots "x"`},
		{name: "badhost", in: "\n\n-x\n", err: "line 3: host \"-x\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHostFile([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	isLocal := func(h string) bool { return h == "localhost" || h == "me" }
	type p = placement
	for _, tc := range []struct {
		name  string
		hosts []hostSlots
		n     int
		want  []placement
		err   string
	}{
		{name: "local", n: 3, want: []placement{
			{0, "localhost", true, 0, 3}, {1, "localhost", true, 1, 3}, {2, "localhost", true, 2, 3}}},
		{name: "in order", hosts: []hostSlots{{"a", 2}, {"b", 2}}, n: 4, want: []placement{
			{0, "a", false, 0, 2}, {1, "a", false, 1, 2}, {2, "b", false, 0, 2}, {3, "b", false, 1, 2}}},
		{name: "all slots", hosts: []hostSlots{{"me", 1}, {"b", 2}}, want: []placement{
			{0, "me", true, 0, 1}, {1, "b", false, 0, 2}, {2, "b", false, 1, 2}}},
		{name: "fewer", hosts: []hostSlots{{"a", 2}, {"b", 2}}, n: 3, want: []placement{
			{0, "a", false, 0, 2}, {1, "a", false, 1, 2}, {2, "b", false, 0, 1}}},
		{name: "repeated host", hosts: []hostSlots{{"a", 1}, {"b", 1}, {"a", 1}}, want: []placement{
			{0, "a", false, 0, 2}, {1, "b", false, 0, 1}, {2, "a", false, 1, 2}}},
		{name: "too many", hosts: []hostSlots{{"a", 2}}, n: 3, err: "only 2 slots"},
		{name: "none", n: 0, err: "-n 0"},
		{name: "negative", hosts: []hostSlots{{"a", 2}}, n: -1, err: "-n -1"},
		{name: "huge", n: maxRanks + 1, err: "at most"},
		{name: "huge hosts", hosts: slices.Repeat([]hostSlots{{"a", maxSlots}}, maxRanks/maxSlots+1), err: "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := assign(tc.hosts, tc.n, isLocal)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %d places, %v; want error containing %q", len(got), err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestIsLocalHost(t *testing.T) {
	for _, h := range []string{"localhost", "LOCALHOST", "127.0.0.1", "::1"} {
		if !isLocalHost(h) {
			t.Errorf("isLocalHost(%q) = false", h)
		}
	}
	if isLocalHost("surely-not-this-host.invalid") {
		t.Error("a foreign name counts as local")
	}
}

func TestStoreEndpoint(t *testing.T) {
	ip := func() (string, error) { return "192.0.2.7", nil }
	noIP := func() (string, error) { return "", errors.New("no address") }
	for _, tc := range []struct {
		flag        string
		remote      bool
		hostIP      func() (string, error)
		listen, adv string
		err         string
	}{
		{"", false, noIP, "127.0.0.1:0", "", ""},
		{"", true, ip, "0.0.0.0:0", "192.0.2.7", ""},
		{"", true, noIP, "", "", "no address"},
		{"10.1.0.1:29500", true, noIP, "10.1.0.1:29500", "", ""},
		{"head-node:0", true, noIP, "head-node:0", "", ""},
		{":7000", true, ip, ":7000", "192.0.2.7", ""},
		{":7000", false, noIP, ":7000", "127.0.0.1", ""},
		{"[::]:0", true, ip, "[::]:0", "192.0.2.7", ""},
		{"nonsense", false, ip, "", "", "--store-addr"},
	} {
		listen, adv, err := storeEndpoint(tc.flag, tc.remote, tc.hostIP)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("storeEndpoint(%q, %v) error %v, want %q", tc.flag, tc.remote, err, tc.err)
			}
			continue
		}
		if err != nil || listen != tc.listen || adv != tc.adv {
			t.Errorf("storeEndpoint(%q, %v) = %q, %q, %v; want %q, %q", tc.flag, tc.remote, listen, adv, err, tc.listen, tc.adv)
		}
	}
}

// checkHosts checks what every parser of host lists promises.
func checkHosts(t *testing.T, hosts []hostSlots) {
	t.Helper()
	for _, h := range hosts {
		if err := checkHostName(h.name); err != nil {
			t.Fatalf("accepted bad host %q: %v", h.name, err)
		}
		if h.slots < 1 || h.slots > maxSlots {
			t.Fatalf("accepted %d slots", h.slots)
		}
	}
}

func FuzzParseHostFile(f *testing.F) {
	for _, s := range []string{"a\nb:2\nc slots=3 # x\n", "[::1]:2\n", "a:2 slots=3", "#\n\n", "-x", "a slots=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		hosts, err := parseHostFile([]byte(in))
		if err != nil {
			return
		}
		checkHosts(t, hosts)
		// Formatting and parsing again gives the same hosts.
		var b strings.Builder
		for _, h := range hosts {
			b.WriteString(h.String() + "\n")
		}
		again, err := parseHostFile([]byte(b.String()))
		if err != nil || !slices.Equal(again, hosts) {
			t.Fatalf("round trip of %v: %v, %v", hosts, again, err)
		}
	})
}

func FuzzParseHostList(f *testing.F) {
	for _, s := range []string{"a:2,b:2", "[fe80::1%eth0]:3", "a,,b", "a:", "x:1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		hosts, err := parseHostList(in)
		if err != nil {
			return
		}
		checkHosts(t, hosts)
		total := 0
		for _, h := range hosts {
			total += h.slots
		}
		places, err := assign(hosts, 0, func(string) bool { return false })
		if total > maxRanks {
			if err == nil {
				t.Fatalf("assign accepted %d ranks", total)
			}
			return
		}
		if err != nil || len(places) != total {
			t.Fatalf("assign(%v) = %d places, %v; want %d", hosts, len(places), err, total)
		}
	})
}
