package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMapBy(t *testing.T) {
	hosts := []hostSlots{{"a", 3}, {"b", 1}, {"c", 2}}
	got, err := mapBy("node", hosts)
	if err != nil {
		t.Fatal(err)
	}
	places, err := assign(got, 5, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, p := range places {
		on = append(on, p.host)
	}
	if want := []string{"a", "b", "c", "a", "c"}; !reflect.DeepEqual(on, want) {
		t.Errorf("--map-by node places ranks on %v, want %v", on, want)
	}
	if places[3].localRank != 1 || places[3].localSize != 2 || places[4].localRank != 1 {
		t.Errorf("local ranks %+v", places)
	}
	if same, _ := mapBy("slot", hosts); !reflect.DeepEqual(same, hosts) {
		t.Errorf("--map-by slot changed the hosts: %v", same)
	}
	if _, err := mapBy("socket", hosts); err == nil {
		t.Error("--map-by socket accepted")
	}
}

func TestRankTableHosts(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.topo")
	if err := os.WriteFile(file, []byte("host a ranks 0,2,3\nhost b ranks 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts, abs, err := rankTableHosts(file, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []hostSlots{{"a", 1}, {"b", 1}, {"a", 2}}; !reflect.DeepEqual(hosts, want) || abs != file {
		t.Errorf("hosts %v, path %q", hosts, abs)
	}
	if _, _, err := rankTableHosts(file, 3); err == nil || !strings.Contains(err.Error(), "places 4 ranks, not -n 3") {
		t.Errorf("size mismatch: %v", err)
	}
	bad := filepath.Join(dir, "bad.topo")
	os.WriteFile(bad, []byte("host -x ranks 0\n"), 0o644)
	if _, _, err := rankTableHosts(bad, 0); err == nil {
		t.Error("a host name starting with '-' accepted")
	}
	cfg, err := parseRunFlags([]string{"--rank-table", file, "--map-by", "slot", "--", "prog"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.hosts) != 3 || cfg.env[len(cfg.env)-1] != "HCOMM_RANK_TABLE="+file {
		t.Errorf("config %+v", cfg)
	}
	if _, err := parseRunFlags([]string{"--rank-table", file, "--hosts", "a", "--", "prog"}, os.Stderr); err == nil {
		t.Error("--rank-table with --hosts accepted")
	}
}
