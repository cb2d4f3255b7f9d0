package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// ErrMalformed is wrapped by every error the decoders in this package return
// for bytes that are not a valid encoding.
var ErrMalformed = errors.New("wire: malformed message")

// All integers on the wire are little-endian.
var le = binary.LittleEndian

// FingerprintSize is the size of an encoded Fingerprint in bytes. The
// layout is:
//
//	[0:8]   Seq
//	[8:16]  Count
//	[16:20] Root
//	[20]    Coll
//	[21]    DType
//	[22]    Op
//	[23]    reserved, zero
const FingerprintSize = 24

// MarshalTo writes f to b[:FingerprintSize]. b must be at least that long.
func (f *Fingerprint) MarshalTo(b []byte) {
	b = b[:FingerprintSize]
	le.PutUint64(b[0:8], f.Seq)
	le.PutUint64(b[8:16], uint64(f.Count))
	le.PutUint32(b[16:20], uint32(f.Root))
	b[20] = uint8(f.Coll)
	b[21] = uint8(f.DType)
	b[22] = uint8(f.Op)
	b[23] = 0
}

// Unmarshal decodes f from the first FingerprintSize bytes of b. Unknown
// collective, type or operator numbers are kept as they are (a receiver then
// reports a mismatch that shows them); only a short buffer or a non-zero
// reserved byte is an error.
func (f *Fingerprint) Unmarshal(b []byte) error {
	if len(b) < FingerprintSize {
		return fmt.Errorf("wire: fingerprint needs %d bytes, have %d: %w", FingerprintSize, len(b), ErrMalformed)
	}
	if b[23] != 0 {
		return fmt.Errorf("wire: fingerprint reserved byte is %#x: %w", b[23], ErrMalformed)
	}
	*f = Fingerprint{
		Seq:   le.Uint64(b[0:8]),
		Count: int64(le.Uint64(b[8:16])),
		Root:  int32(le.Uint32(b[16:20])),
		Coll:  sched.Coll(b[20]),
		DType: reduce.DType(b[21]),
		Op:    reduce.Op(b[22]),
	}
	return nil
}
