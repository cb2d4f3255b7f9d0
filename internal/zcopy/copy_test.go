package zcopy

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/hcomm-go/hcomm/internal/reduce"
)

// BenchmarkCopyBandwidth is the bound of the zero-copy path's large
// calls: what one goroutine, and two at once (two ranks copying at the
// same time, as in AllGather and AllToAll), copy per second, with plain
// stores (copy) and around the caches (Copy's large case). MB/s is the
// bytes copied by all copiers together.
//
//	go test -run '^$' -bench CopyBandwidth -count 3 ./internal/zcopy
func BenchmarkCopyBandwidth(b *testing.B) {
	for _, n := range []int{512 << 10, 4 << 20, 16 << 20, 32 << 20} {
		for _, par := range []int{1, 2} {
			for _, stream := range []bool{false, true} {
				kind := "plain"
				if stream {
					kind = "stream"
				}
				b.Run(fmt.Sprintf("%s/copiers=%d/%dKiB", kind, par, n>>10), func(b *testing.B) {
					src, dst := make([][]byte, par), make([][]byte, par)
					for i := range par {
						src[i], dst[i] = make([]byte, n), make([]byte, n)
						for j := range src[i] {
							src[i][j] = byte(j)
						}
						copy(dst[i], src[i]) // no page faults in the loop
					}
					b.SetBytes(int64(par * n))
					b.ResetTimer()
					var wg sync.WaitGroup
					for i := range par {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range b.N {
								if stream {
									reduce.CopyStream(dst[i], src[i])
								} else {
									copy(dst[i], src[i])
								}
							}
						}()
					}
					wg.Wait()
				})
			}
		}
	}
}

// plainCopy copies every byte, in pieces or not.
func TestPlainCopy(t *testing.T) {
	for _, n := range []int{0, 1, plainPiece - 1, plainPiece, plainPiece + 1, 3*plainPiece + 17} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*31 + 7)
		}
		dst := make([]byte, n+1)
		dst[n] = 0xee
		plainCopy(dst[:n], src)
		if !bytes.Equal(dst[:n], src) || dst[n] != 0xee {
			t.Errorf("plainCopy of %d bytes: wrong bytes or wrote past the end", n)
		}
	}
}
