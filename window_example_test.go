package hcomm_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/hcomm-go/hcomm"
)

// Each rank writes a greeting into the next rank's window and signals it;
// the next rank waits for the signal and reads its own memory.
func ExampleComm_AllocWindow() {
	ctx := context.Background()
	comms, err := hcomm.NewLocal(ctx, 3, nil)
	if err != nil {
		panic(err)
	}
	got := make([]string, len(comms))
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() {
			defer c.Close()
			w, err := c.AllocWindow(ctx, 64)
			if err != nil {
				panic(err)
			}
			next := (c.Rank() + 1) % c.Size()
			msg := fmt.Sprintf("hello from %d", c.Rank())
			if err := w.PutSignal(ctx, next, 0, []byte(msg), 0, 1); err != nil {
				panic(err)
			}
			if _, err := w.WaitSignal(ctx, 0, 1); err != nil {
				panic(err)
			}
			got[c.Rank()] = string(w.Bytes()[:len(msg)])
			if err := w.Close(ctx); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	fmt.Println(got)
	// Output: [hello from 2 hello from 0 hello from 1]
}
