package topo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// File is a topology file's placement: which ranks run on which host, the
// hosts' groups and NICs, and link speeds.
type File struct {
	// Source names the file in errors ("rank table /etc/hccl.json").
	Source string
	// Digest identifies the contents (ranks compare it).
	Digest string
	Hosts  []FileHost
	Links  Links
	// DeviceIP is the rank table's device_ip of each rank that has one.
	DeviceIP map[int]string
}

// FileHost is one host of a topology file.
type FileHost struct {
	Name  string
	Group string // "" for none
	Ranks []int
	NICs  []string // interfaces the host must have
}

// maxFileBytes bounds a topology file.
const maxFileBytes = 16 << 20

// maxRanks bounds the ranks a file may name.
const maxRanks = 1 << 20

// Load reads a topology file: an HCCL rank table if it is JSON (its first
// non-space byte is '{'), else hcomm's own format.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology file: %w", err)
	}
	return Parse(path, b)
}

// Parse parses a topology file's contents; name is the file's name for
// errors.
func Parse(name string, b []byte) (*File, error) {
	if len(b) > maxFileBytes {
		return nil, errorf("topology file "+name, "%d bytes is too large", len(b))
	}
	var f *File
	var err error
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		f, err = ParseRankTable(b)
		if err == nil {
			f.Source = "rank table " + name
		}
	} else {
		f, err = ParseFile(b)
		if err == nil {
			f.Source = "topology file " + name
		}
	}
	if err != nil {
		return nil, errorf("topology file "+name, "%v", err)
	}
	sum := sha256.Sum256(b)
	f.Digest = hex.EncodeToString(sum[:8])
	return f, nil
}

// jsonNum accepts a number written either as a JSON number or as a string
// holding one, as rank tables do ("rank_id": "0").
type jsonNum struct {
	v   int
	set bool
}

func (n *jsonNum) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 || v > 1<<31-1 {
		return fmt.Errorf("%s is not a non-negative integer", b)
	}
	n.v, n.set = v, true
	return nil
}

type rtDevice struct {
	DeviceID jsonNum `json:"device_id"`
	DeviceIP string  `json:"device_ip"`
	RankID   jsonNum `json:"rank_id"`
}

type rtServer struct {
	ServerID    string     `json:"server_id"`
	HostIP      string     `json:"host_ip"`
	ContainerIP string     `json:"container_ip"`
	Device      []rtDevice `json:"device"`
}

type rankTable struct {
	Version      string     `json:"version"`
	Status       string     `json:"status"`
	ServerCount  jsonNum    `json:"server_count"`
	ServerList   []rtServer `json:"server_list"`
	SuperPodList []struct {
		SuperPodID string `json:"super_pod_id"`
		ServerList []struct {
			ServerID string `json:"server_id"`
		} `json:"server_list"`
	} `json:"super_pod_list"`
}

// ParseRankTable parses an HCCL rank table (hccl.json): version 1.0
// (server_list of servers, each with its device list of rank_id and
// device_ip) and the super-pod forms (1.2 and 2.0: the same server list
// plus super_pod_list, whose super pods become hcomm's host groups).
// server_count, when present, must match the server list; a status other
// than "completed" is an error, as for HCCL.
func ParseRankTable(b []byte) (*File, error) {
	var rt rankTable
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&rt); err != nil {
		return nil, fmt.Errorf("not a rank table: %v", err)
	}
	if d.More() {
		return nil, fmt.Errorf("not a rank table: data after the JSON object")
	}
	switch rt.Version {
	case "1.0", "1.1", "1.2", "2.0":
	case "":
		return nil, fmt.Errorf("rank table has no version")
	default:
		return nil, fmt.Errorf("rank table version %q (hcomm reads 1.0, 1.2 and 2.0)", rt.Version)
	}
	if rt.Status != "" && rt.Status != "completed" {
		return nil, fmt.Errorf("rank table status is %q, not \"completed\"", rt.Status)
	}
	if len(rt.ServerList) == 0 {
		return nil, fmt.Errorf("rank table has no server_list")
	}
	if rt.ServerCount.set && rt.ServerCount.v != len(rt.ServerList) {
		return nil, fmt.Errorf("rank table server_count is %d but server_list has %d servers", rt.ServerCount.v, len(rt.ServerList))
	}
	f := &File{DeviceIP: map[int]string{}}
	index := map[string]int{}
	total := 0
	for i, s := range rt.ServerList {
		name := s.ServerID
		if name == "" {
			name = s.HostIP
		}
		if name == "" {
			return nil, fmt.Errorf("server %d of the rank table has no server_id", i)
		}
		if _, dup := index[name]; dup {
			return nil, fmt.Errorf("server %s appears twice in the rank table", name)
		}
		index[name] = i
		h := FileHost{Name: name}
		for j, dev := range s.Device {
			if !dev.RankID.set {
				return nil, fmt.Errorf("device %d of server %s has no rank_id", j, name)
			}
			total++
			if total > maxRanks || dev.RankID.v >= maxRanks {
				return nil, fmt.Errorf("rank table names more than %d ranks", maxRanks)
			}
			h.Ranks = append(h.Ranks, dev.RankID.v)
			if dev.DeviceIP != "" {
				f.DeviceIP[dev.RankID.v] = dev.DeviceIP
			}
		}
		if len(h.Ranks) == 0 {
			return nil, fmt.Errorf("server %s of the rank table has no devices", name)
		}
		f.Hosts = append(f.Hosts, h)
	}
	for _, sp := range rt.SuperPodList {
		if sp.SuperPodID == "" {
			return nil, fmt.Errorf("rank table super pod without super_pod_id")
		}
		for _, s := range sp.ServerList {
			i, ok := index[s.ServerID]
			if !ok {
				return nil, fmt.Errorf("super pod %s lists server %q, which is not in server_list", sp.SuperPodID, s.ServerID)
			}
			if f.Hosts[i].Group != "" {
				return nil, fmt.Errorf("server %s is in super pods %s and %s", s.ServerID, f.Hosts[i].Group, sp.SuperPodID)
			}
			f.Hosts[i].Group = sp.SuperPodID
		}
	}
	return f, checkRanks(f)
}

// checkRanks checks that a file's ranks are 0..n−1, each once.
func checkRanks(f *File) error {
	seen := map[int]string{}
	for _, h := range f.Hosts {
		for _, r := range h.Ranks {
			if other, dup := seen[r]; dup {
				return fmt.Errorf("rank %d is listed twice (hosts %s and %s)", r, other, h.Name)
			}
			seen[r] = h.Name
		}
	}
	for r := range len(seen) {
		if _, ok := seen[r]; !ok {
			return fmt.Errorf("the file names %d ranks but not rank %d", len(seen), r)
		}
	}
	return nil
}

// ParseFile parses hcomm's own topology format: one statement a line, '#'
// starting a comment.
//
//	host NAME [ranks LIST | slots N] [group NAME] [nic IF[,IF…]]
//	link intra|inter|group SPEED
//
// A host's ranks are a list in CPU-list form ("0-3,8"); "slots N" gives it
// the N ranks after the highest rank of the hosts above it. NAME
// is a host name, an address of the host, or any label; but when some
// NAME of a file is a name or address of a rank's host, every NAME must be
// (Build). SPEED is in
// Gbit/s, with an optional unit: "100", "25gbit", "400mbit".
func ParseFile(b []byte) (*File, error) {
	f := &File{}
	next := 0
	names := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		lineNo := i + 1
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		w := strings.Fields(line)
		if len(w) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("line %d: %s", lineNo, fmt.Sprintf(format, a...))
		}
		switch w[0] {
		case "host":
			if len(w) < 2 {
				return nil, bad("host without a name")
			}
			h := FileHost{Name: w[1]}
			if names[h.Name] {
				return nil, bad("host %s appears twice", h.Name)
			}
			names[h.Name] = true
			placed := false
			for k := 2; k < len(w); k += 2 {
				if k+1 >= len(w) {
					return nil, bad("%q needs a value", w[k])
				}
				v := w[k+1]
				switch w[k] {
				case "ranks", "slots":
					if placed {
						return nil, bad("host %s has both ranks and slots, or one of them twice", h.Name)
					}
					placed = true
					if w[k] == "ranks" {
						rs, err := ParseCPUList(v)
						if err != nil || len(rs) == 0 {
							return nil, bad("bad rank list %q", v)
						}
						h.Ranks = rs
						next = max(next, rs[len(rs)-1]+1)
						break
					}
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 || next+n > maxRanks {
						return nil, bad("bad slot count %q", v)
					}
					for range n {
						h.Ranks = append(h.Ranks, next)
						next++
					}
				case "group":
					h.Group = v
				case "nic":
					for _, nic := range strings.Split(v, ",") {
						if nic == "" {
							return nil, bad("empty NIC name")
						}
						h.NICs = append(h.NICs, nic)
					}
				default:
					return nil, bad("unknown host attribute %q (want ranks, slots, group or nic)", w[k])
				}
			}
			if !placed {
				return nil, bad("host %s has neither ranks nor slots", h.Name)
			}
			f.Hosts = append(f.Hosts, h)
		case "link":
			if len(w) != 3 {
				return nil, bad("want: link intra|inter|group SPEED")
			}
			v, err := parseSpeed(w[2])
			if err != nil {
				return nil, bad("%v", err)
			}
			switch w[1] {
			case "intra":
				f.Links.Intra = v
			case "inter":
				f.Links.Inter = v
			case "group":
				f.Links.Group = v
			default:
				return nil, bad("unknown link class %q (want intra, inter or group)", w[1])
			}
		default:
			return nil, bad("unknown statement %q (want host or link)", w[0])
		}
	}
	if len(f.Hosts) == 0 {
		return nil, fmt.Errorf("no hosts")
	}
	return f, checkRanks(f)
}

// parseSpeed parses a link speed into Gbit/s.
func parseSpeed(s string) (float64, error) {
	l := strings.ToLower(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"gbit", 1}, {"gb", 1}, {"g", 1}, {"mbit", 1e-3}, {"mb", 1e-3}, {"m", 1e-3}} {
		if t, ok := strings.CutSuffix(l, u.suffix); ok {
			l, mult = t, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(l, 64)
	if err != nil || v <= 0 || v > 1e6 || v != v {
		return 0, fmt.Errorf("bad link speed %q", s)
	}
	return v * mult, nil
}

// Hostnames lists the file's host names in order (for messages).
func (f *File) Hostnames() []string {
	var out []string
	for _, h := range f.Hosts {
		out = append(out, h.Name)
	}
	return slices.Clip(out)
}
