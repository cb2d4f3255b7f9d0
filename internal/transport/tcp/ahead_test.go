package tcp

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestFramesBackToBack checks that frames queued on a connection before
// the receiver reads them arrive whole and in order, whatever their sizes
// around the read-ahead of a polled header read (aheadSize) and the eager
// limit: a batch sent before the first receive, then sizes mixed with
// striped messages while the receiver keeps pace.
func TestFramesBackToBack(t *testing.T) {
	small := []int{0, 1, 8, 23, 24, 25, 100, aheadSize - 40, aheadSize - 24, aheadSize, aheadSize + 1, 5000}
	mixed := append(append([]int{}, small...), eagerMax, eagerMax+1, 200<<10, 3, 0)
	for _, nsocks := range []int{1, 4} {
		t.Run(fmt.Sprintf("nsocks=%d", nsocks), func(t *testing.T) {
			w := newWorld(t, 2, nsocks)
			trs := []*Transport{w.transport(0), w.transport(1)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var sizes []int
			for range 3 {
				sizes = append(sizes, small...) // ~37 KiB: fits the socket buffers
			}
			batch := len(sizes)
			for range 4 {
				sizes = append(sizes, mixed...)
			}
			sent := make(chan struct{})
			runAll(t, trs, func(tr *Transport) error {
				if tr.Rank() == 0 {
					for seq, n := range sizes {
						if seq == batch {
							close(sent)
						}
						p := make([]byte, n)
						fill(p, 0, seq)
						fp := fpFor(seq, n)
						if err := tr.Send(ctx, 1, &fp, p); err != nil {
							return err
						}
					}
					return nil
				}
				select { // the batch is written before the first receive
				case <-sent:
				case <-ctx.Done():
					return ctx.Err()
				}
				for seq, n := range sizes {
					p := make([]byte, n)
					fp := fpFor(seq, n)
					if err := tr.Recv(ctx, 0, &fp, p); err != nil {
						return fmt.Errorf("message %d (%d bytes): %w", seq, n, err)
					}
					if err := check(p, 0, seq); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}
