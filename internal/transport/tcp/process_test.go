package tcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/cpuwait"
	"github.com/hcomm-go/hcomm/internal/errs"
)

// Tests in this file run ranks in separate processes.

func TestProcessExchange(t *testing.T) {
	tests := []struct {
		size, nsocks int
	}{
		{2, 1},
		{3, 2},
		{4, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("ranks=%d/nsocks=%d", tt.size, tt.nsocks), func(t *testing.T) {
			w := newWorld(t, tt.size, tt.nsocks)
			for r := 1; r < tt.size; r++ {
				w.spawn(r, "exchange")
			}
			tr := w.transport(0)
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := exchange(ctx, tr); err != nil {
				// What each rank did, to tell a slow machine from a
				// connection that never came.
				t.Fatalf("after %v: %v\nrank 0:\n%s%s", time.Since(start).Round(time.Millisecond), err, w.logs, w.outputs())
			}
			for r := 1; r < tt.size; r++ {
				w.wait(r, 10*time.Second)
			}
		})
	}
}

func TestProcessMismatch(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(fmt.Sprintf("nsocks=%d", nsocks), func(t *testing.T) {
			w := newWorld(t, 2, nsocks)
			w.spawn(1, "mismatch")
			tr := w.transport(0)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			buf := make([]byte, 100)
			recv := func(seq int) error {
				fp := fpFor(seq, len(buf))
				return tr.Recv(ctx, 1, &fp, buf)
			}

			var m *errs.MismatchError
			err := recv(1)
			if !errors.As(err, &m) || m.Peer != 1 || m.Local.Seq != 1 || m.Remote.Seq != 99 || m.Detail != "" {
				t.Fatalf("wrong fingerprint: err = %v, want a mismatch of op #1 against op #99", err)
			}
			if !errors.Is(err, errs.ErrMismatch) {
				t.Errorf("error %v does not wrap ErrMismatch", err)
			}
			// The stream stayed in step: the next message is intact.
			if err := recv(2); err != nil {
				t.Fatalf("message after the mismatch: %v", err)
			}
			if err := check(buf, 1, 2); err != nil {
				t.Fatal(err)
			}
			err = recv(3)
			if !errors.As(err, &m) || m.Detail != "50 bytes vs 100 bytes" {
				t.Fatalf("short message: err = %v, want a mismatch with detail \"50 bytes vs 100 bytes\"", err)
			}
			err = recv(4)
			if !errors.As(err, &m) || m.Detail != "1048576 bytes vs 100 bytes" {
				t.Fatalf("long message: err = %v, want a mismatch with detail \"1048576 bytes vs 100 bytes\"", err)
			}
			// That one could not be absorbed: the pair is closed.
			if err := recv(5); !errors.Is(err, errs.ErrPeerLost) {
				t.Fatalf("after a message longer than the receive: err = %v, want ErrPeerLost", err)
			}
			if !strings.Contains(w.logs.String(), "longer than the receive") {
				t.Errorf("no log line for the oversized message; log:\n%s", w.logs.String())
			}
			w.wait(1, 10*time.Second)
		})
	}
}

func TestProcessAbortReachesPeer(t *testing.T) {
	w := newWorld(t, 2, 2)
	p := w.spawn(1, "abort")
	tr := w.transport(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fp := fpFor(1, 1)
	if err := tr.Send(ctx, 1, &fp, []byte{1}); err != nil {
		t.Fatal(err)
	}
	// Rank 1 reads nothing more and aborts once told that this send is
	// under way; it blocks until then (64 MiB is far more than the socket
	// buffers hold).
	start, wait := time.Now(), cpuwait.Total()
	big := make([]byte, 64<<20)
	fp = fpFor(2, len(big))
	sent := make(chan error, 1)
	go func() { sent <- tr.Send(ctx, 1, &fp, big) }()
	awaitCall(t, tr, 1, true)
	p.tell(t)
	err := <-sent
	if err != nil && !errors.Is(err, errs.ErrAborted) {
		t.Fatalf("Send blocked on the aborting rank: %v, want success or ErrAborted", err)
	}
	// 5 s and whatever this process was kept from a CPU meanwhile.
	if d, w := time.Since(start), cpuwait.Total()-wait; d > 5*time.Second+w {
		t.Errorf("Send blocked on the aborting rank took %v (%v of it waiting for a CPU)", d, w)
	}
	fp = fpFor(3, 8)
	err = tr.Recv(ctx, 1, &fp, make([]byte, 8))
	var perr *errs.PeerError
	if !errors.As(err, &perr) || perr.Peer != 1 || perr.Kind != errs.ErrAborted {
		t.Fatalf("Recv from the aborted rank: %v, want a PeerError{Peer: 1, Kind: ErrAborted}", err)
	}
	if perr.Cause == nil || perr.Cause.Error() != "child gave up" {
		t.Errorf("abort cause = %v, want \"child gave up\"", perr.Cause)
	}
	// Later calls keep reporting the abort.
	if err := tr.Send(ctx, 1, &fp, make([]byte, 8)); !errors.Is(err, errs.ErrAborted) {
		t.Errorf("Send after the peer aborted: %v, want ErrAborted", err)
	}
	p.release()
	w.wait(1, 10*time.Second)
}

func TestProcessKilledPeer(t *testing.T) {
	t.Run("recv", func(t *testing.T) {
		w := newWorld(t, 2, 2)
		p := w.spawn(1, "stream")
		tr := w.transport(0)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		buf := make([]byte, 4<<20)
		for seq := 0; seq < 3; seq++ {
			fp := fpFor(seq, len(buf))
			if err := tr.Recv(ctx, 1, &fp, buf); err != nil {
				t.Fatal(err)
			}
			if err := check(buf[:64], 1, seq); err != nil {
				t.Fatal(err)
			}
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		killed, wait := time.Now(), cpuwait.Total()
		var err error
		for seq := 3; err == nil && time.Since(killed) < 5*time.Second; seq++ {
			fp := fpFor(seq, len(buf))
			err = tr.Recv(ctx, 1, &fp, buf)
		}
		var perr *errs.PeerError
		if !errors.As(err, &perr) || perr.Peer != 1 || !errors.Is(err, errs.ErrPeerLost) {
			t.Fatalf("Recv from a killed rank: %v, want a PeerError{Peer: 1, Kind: ErrPeerLost}", err)
		}
		// 1 s and whatever this process was kept from a CPU meanwhile.
		if d, w := time.Since(killed), cpuwait.Total()-wait; d > time.Second+w {
			t.Errorf("took %v to notice the killed rank (%v of it waiting for a CPU)", d, w)
		}
	})
	t.Run("send", func(t *testing.T) {
		w := newWorld(t, 2, 1)
		p := w.spawn(1, "stall")
		tr := w.transport(0)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := tr.Connect(ctx, []int{1}); err != nil {
			t.Fatal(err)
		}
		big := make([]byte, 64<<20)
		fp := fpFor(1, len(big))
		sent := make(chan error, 1)
		go func() { sent <- tr.Send(ctx, 1, &fp, big) }()
		awaitCall(t, tr, 1, true) // the Send is under way (it cannot finish: rank 1 reads nothing)
		killedAt, wait := time.Now(), cpuwait.Total()
		p.cmd.Process.Signal(syscall.SIGKILL)
		err := <-sent
		if !errors.Is(err, errs.ErrPeerLost) {
			t.Fatalf("Send to a killed rank: %v, want ErrPeerLost", err)
		}
		if d, w := time.Since(killedAt), cpuwait.Total()-wait; d > time.Second+w {
			t.Errorf("took %v to notice the killed rank (%v of it waiting for a CPU)", d, w)
		}
	})
}
