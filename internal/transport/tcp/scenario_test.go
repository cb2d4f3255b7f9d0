package tcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// exchangeSizes covers empty, tiny, odd, around the striping threshold and
// beyond 4 MiB.
var exchangeSizes = []int{0, 1, 7, 1000, 4093, stripeMin - 1, stripeMin, stripeMin + 1, 1<<20 + 3, 4<<20 + 17}

// exchange is run by every rank of a world: a ring shift for every size,
// each rank sending to the next while receiving from the previous, then
// every pair exchanging a run of messages in both directions at once to
// check ordering and concurrency across peers.
func exchange(ctx context.Context, tr *Transport) error {
	n, r := tr.Size(), tr.Rank()
	next, prev := (r+1)%n, (r-1+n)%n
	for seq, size := range exchangeSizes {
		out, in := make([]byte, size), make([]byte, size)
		fill(out, r, seq)
		sendErr := make(chan error, 1)
		go func() {
			fp := fpFor(seq, size)
			sendErr <- tr.Send(ctx, next, &fp, out)
		}()
		fp := fpFor(seq, size)
		if err := tr.Recv(ctx, prev, &fp, in); err != nil {
			return fmt.Errorf("ring recv of %d bytes from %d: %w", size, prev, err)
		}
		if err := <-sendErr; err != nil {
			return fmt.Errorf("ring send of %d bytes to %d: %w", size, next, err)
		}
		if err := check(in, prev, seq); err != nil {
			return err
		}
	}

	const runs = 40
	size := func(seq int) int { return (seq * 997) % 5000 }
	var wg sync.WaitGroup
	errc := make(chan error, 2*n)
	for q := 0; q < n; q++ {
		if q == r {
			continue
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for seq := 0; seq < runs; seq++ {
				out := make([]byte, size(seq))
				fill(out, r, 1000+seq)
				fp := fpFor(1000+seq, len(out))
				if err := tr.Send(ctx, q, &fp, out); err != nil {
					errc <- fmt.Errorf("send %d to %d: %w", seq, q, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for seq := 0; seq < runs; seq++ {
				in := make([]byte, size(seq))
				fp := fpFor(1000+seq, len(in))
				if err := tr.Recv(ctx, q, &fp, in); err != nil {
					errc <- fmt.Errorf("recv %d from %d: %w", seq, q, err)
					return
				}
				if err := check(in, q, 1000+seq); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	// Nobody closes before everybody is done with it.
	return barrier(ctx, tr)
}

// barrier exchanges an empty message with every other rank.
func barrier(ctx context.Context, tr *Transport) error {
	var wg sync.WaitGroup
	errc := make(chan error, 2*tr.Size())
	for q := 0; q < tr.Size(); q++ {
		if q == tr.Rank() {
			continue
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			fp := fpFor(-1, 0)
			if err := tr.Send(ctx, q, &fp, nil); err != nil {
				errc <- err
			}
		}()
		go func() {
			defer wg.Done()
			fp := fpFor(-1, 0)
			if err := tr.Recv(ctx, q, &fp, nil); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// mismatchSender (rank 1) sends rank 0 a message under the wrong
// fingerprint, a good one, a short one and one too long for the receive.
func mismatchSender(ctx context.Context, tr *Transport) error {
	send := func(seq, size int) error {
		p := make([]byte, size)
		fill(p, 1, seq)
		fp := fpFor(seq, size)
		return tr.Send(ctx, 0, &fp, p)
	}
	for _, m := range []struct{ seq, size int }{{99, 100}, {2, 100}, {3, 50}} {
		if err := send(m.seq, m.size); err != nil {
			return err
		}
	}
	// Rank 0 closes the connection on this one; the send may or may not
	// see it.
	if err := send(4, 1<<20); err != nil && !errors.Is(err, errs.ErrPeerLost) {
		return err
	}
	fp := fpFor(5, 1)
	err := tr.Recv(ctx, 0, &fp, make([]byte, 1))
	var perr *errs.PeerError
	if !errors.As(err, &perr) || perr.Peer != 0 || !errors.Is(err, errs.ErrPeerLost) {
		return fmt.Errorf("after rank 0 closed: %v, want a PeerError for rank 0 (ErrPeerLost)", err)
	}
	return nil
}

// abortAfterConnect (rank 1) waits for a message from rank 0, then for
// the test's word that rank 0 is blocked sending to it, aborts, and stays
// alive until the test has seen the abort (release).
func abortAfterConnect(ctx context.Context, tr *Transport) error {
	fp := fpFor(1, 1)
	if err := tr.Recv(ctx, 0, &fp, make([]byte, 1)); err != nil {
		return err
	}
	if err := awaitTest(); err != nil {
		return err
	}
	tr.Abort(errors.New("child gave up"))
	fp = fpFor(2, 1)
	if err := tr.Recv(ctx, 0, &fp, make([]byte, 1)); !errors.Is(err, errs.ErrAborted) {
		return fmt.Errorf("Recv after Abort: %v, want ErrAborted", err)
	}
	awaitRelease()
	return nil
}

// streamForever (rank 1) sends 4 MiB messages to rank 0 until it fails.
func streamForever(ctx context.Context, tr *Transport) error {
	p := make([]byte, 4<<20)
	for seq := 0; ; seq++ {
		fill(p[:64], 1, seq)
		fp := fpFor(seq, len(p))
		if err := tr.Send(ctx, 0, &fp, p); err != nil {
			return err
		}
	}
}

// stallAfterConnect (rank 1) connects to rank 0 and then reads nothing.
func stallAfterConnect(ctx context.Context, tr *Transport) error {
	if err := tr.Connect(ctx, []int{0}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// echo (rank 1) sends back every message of HCOMM_TCP_TEST_SIZE bytes it
// gets from rank 0, until rank 0 goes away.
func echo(ctx context.Context, tr *Transport) error {
	size, _ := strconv.Atoi(os.Getenv("HCOMM_TCP_TEST_SIZE"))
	p := make([]byte, size)
	fp := fpFor(0, size)
	for {
		if err := tr.Recv(ctx, 0, &fp, p); err != nil {
			if errors.Is(err, errs.ErrPeerLost) {
				return nil
			}
			return err
		}
		if err := tr.Send(ctx, 0, &fp, p); err != nil {
			return err
		}
	}
}
