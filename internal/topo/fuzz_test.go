package topo

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func FuzzCard(f *testing.F) {
	for _, c := range cardsOn([]int{0, 1}) {
		b, _ := c.MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{cardVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Card
		if c.UnmarshalBinary(b) != nil {
			return
		}
		enc, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded card does not encode: %v", err)
		}
		var d Card
		if err := d.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-encoded card does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(c), normal(d)) {
			t.Fatalf("round trip changed the card:\n%+v\n%+v", c, d)
		}
	})
}

func FuzzCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8", "", "1-0", "0,,1", "65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCPUList(s)
		if err != nil {
			return
		}
		back, err := ParseCPUList(FormatCPUList(c))
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("%q: %v formats to %q which parses to %v, %v", s, c, FormatCPUList(c), back, err)
		}
	})
}

func addFiles(f *testing.F) {
	ents, _ := os.ReadDir("testdata")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("testdata", e.Name())); err == nil {
			f.Add(b)
		}
	}
}

// FuzzParse feeds both topology formats (Parse picks by the first byte)
// and builds a topology from every file that parses: no input may panic,
// and a parsed file's ranks are 0..n−1 each once.
func FuzzParse(f *testing.F) {
	addFiles(f)
	f.Add([]byte("host a slots 2\nhost b ranks 2-3 group g nic eth0\nlink inter 10"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		n := 0
		for _, h := range file.Hosts {
			n += len(h.Ranks)
		}
		if n > 4096 {
			return
		}
		hostOf := make([]int, n)
		for r := range hostOf {
			hostOf[r] = r % 3
		}
		if _, err := Build(cardsOn(hostOf), file); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Build error of type %T: %v", err, err)
			}
		}
	})
}

func FuzzRankTable(f *testing.F) {
	addFiles(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ParseRankTable(b)
		if err != nil {
			return
		}
		if checkRanks(file) != nil {
			t.Fatal("ParseRankTable returned a file with bad ranks")
		}
	})
}
