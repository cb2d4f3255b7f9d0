//go:build !linux

package shm

import (
	"context"
	"errors"
	"fmt"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

var errUnsupported = fmt.Errorf("shm transport needs Linux: %w", errs.ErrInvalidArgument)

// Transport is the shared-memory transport. It is only available on Linux.
type Transport struct{}

// New fails: the shared-memory transport is only available on Linux.
func New(ctx context.Context, cfg Config) (*Transport, error) { return nil, errUnsupported }

// Rank returns this rank's global rank.
func (t *Transport) Rank() int { return 0 }

// Size returns the communicator size.
func (t *Transport) Size() int { return 0 }

// Send fails: the transport is unavailable on this system.
func (t *Transport) Send(context.Context, int, *wire.Fingerprint, []byte) error {
	return errUnsupported
}

// Recv fails: the transport is unavailable on this system.
func (t *Transport) Recv(context.Context, int, *wire.Fingerprint, []byte) error {
	return errUnsupported
}

// Abort does nothing.
func (t *Transport) Abort(error) {}

// Close does nothing.
func (t *Transport) Close() error { return errors.Join() }
