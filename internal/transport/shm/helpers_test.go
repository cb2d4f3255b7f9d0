//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/memkv"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// fileKV is a store shared by the processes of a test through a directory.
type fileKV struct{ dir string }

func (kv fileKV) path(key string) string { return filepath.Join(kv.dir, url.PathEscape(key)) }

func (kv fileKV) Set(_ context.Context, key string, value []byte) error {
	tmp, err := os.CreateTemp(kv.dir, ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(value); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), kv.path(key))
}

func (kv fileKV) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		v, err := os.ReadFile(kv.path(key))
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func newMemKV() *memkv.KV { return memkv.New() }

// variant names a configuration shared by all ranks of a test.
func variantConfig(variant string, cfg *Config) {
	switch variant {
	case "", "default":
	case "nocma":
		cfg.CMAThreshold = -1
	case "fallback":
		cfg.forceCMAFallback = true
	case "small": // many slot wrap-arounds, single copy from 128 KiB
		cfg.SlotBytes = 4096
		cfg.Slots = 2
		cfg.CMAThreshold = 1
	case "nopopulate": // pages mapped by their first touch
		cfg.noPopulate = true
	case "yield": // waits poll with sched_yield, as when oversubscribed
		cfg.Yield = 1
	case "odd": // slots that do not divide the sizes, no single copy
		cfg.SlotBytes = 5000 // rounded up to 5056
		cfg.Slots = 3
		cfg.CMAThreshold = -1
	default:
		panic("unknown variant " + variant)
	}
}

func localRanks(size int) []int {
	l := make([]int, size)
	for i := range l {
		l[i] = i
	}
	return l
}

// newLocalGroup creates size transports in this process.
func newLocalGroup(t testing.TB, size int, variant string) []*Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv := newMemKV()
	trs := make([]*Transport, size)
	errc := make(chan error, size)
	for r := range size {
		go func() {
			cfg := Config{Rank: r, Size: size, Local: localRanks(size), KV: kv}
			variantConfig(variant, &cfg)
			tr, err := New(ctx, cfg)
			trs[r] = tr
			errc <- err
		}()
	}
	for range size {
		if err := <-errc; err != nil {
			t.Fatalf("New: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, tr := range trs {
			tr.Close()
		}
	})
	return trs
}

func fpFor(seq, size int) wire.Fingerprint {
	return wire.Fingerprint{Seq: uint64(seq), Coll: wire.CollSendRecv, DType: reduce.Uint8, Count: int64(size), Root: 7}
}

// fill writes a pattern that differs per seed and per position, so that
// shifted, repeated or stale slots are noticed.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>9)
	}
}

// check reports the first byte that does not match fill(b, seed).
func check(b []byte, seed int) error {
	for i := range b {
		if want := byte(seed*131 + i*7 + i>>9); b[i] != want {
			return fmt.Errorf("byte %d of %d is %#x, want %#x", i, len(b), b[i], want)
		}
	}
	return nil
}

// leftovers lists segment files created by any of pids.
func leftovers(pids ...int) []string {
	ents, _ := os.ReadDir(shmDir)
	var out []string
	for _, e := range ents {
		for _, pid := range pids {
			if strings.HasPrefix(e.Name(), namePrefix+strconv.Itoa(pid)+"-") {
				out = append(out, e.Name())
			}
		}
	}
	return out
}
