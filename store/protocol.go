package store

// The TCP store protocol.
//
// Both directions carry frames:
//
//	uvarint  length of the rest of the frame (at least 2)
//	byte     request type (client to server) or status (server to client)
//	uvarint  request id: a response carries the id of its request
//	...      payload
//
// The receiver checks the length against its limit before reading the rest,
// and reads large frames in growing pieces, so a frame that lies about its
// length never costs more memory than the bytes actually sent.
//
// A connection opens with a handshake (request id 0) in which the client
// proves first:
//
//	client: opHello  magic "HCST" | uint16 version | 32-byte client nonce
//	server: OK       uint16 version | 32-byte server nonce
//	client: opAuth   client proof
//	server: OK       server proof, or statusUnauthorized and the connection
//	                 is closed
//
// where a proof is HMAC-SHA256 keyed with the job token over the protocol
// version, a role label and both nonces, so the token never crosses the wire
// and each side learns whether the other knows it. Each nonce is fresh, so
// neither proof can be replayed on another connection. Because the client
// proves first, someone who merely connects to the server learns nothing
// with which to test token guesses offline: each guess costs a connection,
// and the server limits those. (Whoever holds a proof, by watching a
// handshake or by posing as the server to a client, can test guesses
// against it offline, as with any challenge-response keyed by a shared
// secret; a random token, as hcomm run makes, leaves nothing to guess.)
//
// Request payloads, after the handshake:
//
//	opSet     uvarint key length | key | value        -> OK
//	opGet     key                                     -> OK value (when the key exists)
//	opAdd     uvarint key length | key | int64 delta  -> OK int64 new value
//	opWait    uvarint n | n × (uvarint length | key)  -> OK (when all keys have been set)
//	opDelete  key                                     -> OK
//	opCancel  (empty; the id names the pending Get or Wait to drop; no response)
//
// Integers are big-endian. An error response carries a short UTF-8 message.

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

const (
	protoMagic   = "HCST"
	protoVersion = 2
	nonceSize    = 32
	proofSize    = sha256.Size

	// maxHandshakeBody bounds frames exchanged before authentication.
	maxHandshakeBody = 128
	// maxErrorMessage bounds the message of an error response.
	maxErrorMessage = 512
	// frameSlack is the frame room beyond the value itself: type, id,
	// a length prefix and the key.
	frameSlack = 1 + binary.MaxVarintLen64 + binary.MaxVarintLen64 + MaxKeySize
	// readChunk is the piece in which large frames are read.
	readChunk = 64 << 10
	// maxWaitKeys is the most keys one Wait request may name.
	maxWaitKeys = 1 << 16
)

// Request types.
const (
	opHello  byte = 1
	opAuth   byte = 2
	opSet    byte = 3
	opGet    byte = 4
	opAdd    byte = 5
	opWait   byte = 6
	opDelete byte = 7
	opCancel byte = 8
)

// Response statuses.
const (
	statusOK           byte = 0
	statusError        byte = 1 // generic; the message says what
	statusTooLarge     byte = 2
	statusNotInteger   byte = 3
	statusUnauthorized byte = 4
	statusBadVersion   byte = 5
)

// errMalformed marks a frame or payload that breaks the protocol.
var errMalformed = errors.New("store: malformed frame")

// frame is one decoded frame.
type frame struct {
	kind    byte // request type or response status
	id      uint64
	payload []byte
}

// appendHeader appends the header of a frame whose payload is n bytes long.
func appendHeader(dst []byte, kind byte, id uint64, n int) []byte {
	var idBuf [binary.MaxVarintLen64]byte
	idLen := binary.PutUvarint(idBuf[:], id)
	dst = binary.AppendUvarint(dst, uint64(1+idLen+n))
	dst = append(dst, kind)
	return append(dst, idBuf[:idLen]...)
}

// appendFrame appends a whole frame.
func appendFrame(dst []byte, kind byte, id uint64, payload []byte) []byte {
	return append(appendHeader(dst, kind, id, len(payload)), payload...)
}

// readFrame reads one frame whose body (everything after the length) may be
// at most maxBody bytes. It returns io.EOF only when r ends cleanly between
// frames.
func readFrame(r *bufio.Reader, maxBody int) (frame, error) {
	f, _, err := readFrameBudget(r, maxBody, nil)
	return f, err
}

// readFrameBudget is readFrame with a memory budget: before reading a body
// larger than readChunk it asks reserve for the body's bytes. When reserve
// refuses, the body is read through and dropped, and the frame comes back
// with its kind and id, a nil payload and skipped set, for the caller to
// answer. A nil reserve grants everything.
func readFrameBudget(r *bufio.Reader, maxBody int, reserve func(n int) bool) (f frame, skipped bool, err error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if err == io.EOF {
			return frame{}, false, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return frame{}, false, fmt.Errorf("%w: truncated length", errMalformed)
		}
		var oe *net.OpError
		if errors.As(err, &oe) {
			// The connection failed (reset by a peer that died, say);
			// that is not the peer's protocol error.
			return frame{}, false, err
		}
		return frame{}, false, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if n < 2 || n > uint64(maxBody) {
		return frame{}, false, fmt.Errorf("%w: frame claims %d bytes, limit %d", errMalformed, n, maxBody)
	}
	if n > readChunk && reserve != nil && !reserve(int(n)) {
		hdr, err := r.Peek(1 + binary.MaxVarintLen64) // n is larger
		if err != nil {
			return frame{}, false, fmt.Errorf("%w: truncated frame of %d bytes: %v", errMalformed, n, err)
		}
		id, k := binary.Uvarint(hdr[1:])
		if k <= 0 {
			return frame{}, false, fmt.Errorf("%w: bad request id", errMalformed)
		}
		if _, err := r.Discard(int(n)); err != nil {
			return frame{}, false, fmt.Errorf("%w: truncated frame of %d bytes: %v", errMalformed, n, err)
		}
		return frame{kind: hdr[0], id: id}, true, nil
	}
	body, err := readBody(r, int(n))
	if err != nil {
		return frame{}, false, fmt.Errorf("%w: truncated frame of %d bytes: %v", errMalformed, n, err)
	}
	id, k := binary.Uvarint(body[1:])
	if k <= 0 {
		return frame{}, false, fmt.Errorf("%w: bad request id", errMalformed)
	}
	return frame{kind: body[0], id: id, payload: body[1+k:]}, false, nil
}

// readBody reads exactly n bytes, growing its buffer as data arrives rather
// than trusting n up front.
func readBody(r io.Reader, n int) ([]byte, error) {
	if n <= readChunk {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	b := make([]byte, 0, readChunk)
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(2*cap(b), n))
			copy(nb, b)
			b = nb
		}
		m, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// decodeKey decodes a payload that is a single key.
func decodeKey(p []byte) (string, error) {
	if len(p) > MaxKeySize {
		return "", fmt.Errorf("%w: key of %d bytes", errMalformed, len(p))
	}
	return string(p), nil
}

// splitKey splits a length-prefixed key off the front of p.
func splitKey(p []byte) (key string, rest []byte, err error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > MaxKeySize || n > uint64(len(p)-k) {
		return "", nil, fmt.Errorf("%w: bad key length", errMalformed)
	}
	end := k + int(n)
	return string(p[k:end]), p[end:], nil
}

func appendKey(dst []byte, key string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// decodeSet decodes an opSet payload. The value aliases p.
func decodeSet(p []byte) (key string, value []byte, err error) {
	return splitKey(p)
}

// decodeAdd decodes an opAdd payload.
func decodeAdd(p []byte) (key string, delta int64, err error) {
	key, rest, err := splitKey(p)
	if err != nil {
		return "", 0, err
	}
	if len(rest) != 8 {
		return "", 0, fmt.Errorf("%w: add delta of %d bytes", errMalformed, len(rest))
	}
	return key, int64(binary.BigEndian.Uint64(rest)), nil
}

func encodeAdd(key string, delta int64) []byte {
	p := appendKey(make([]byte, 0, binary.MaxVarintLen64+len(key)+8), key)
	return binary.BigEndian.AppendUint64(p, uint64(delta))
}

// decodeWait decodes an opWait payload.
func decodeWait(p []byte) ([]string, error) {
	n, k := binary.Uvarint(p)
	// Every key takes at least its one-byte length prefix, and the count
	// is capped: n empty keys cost n string headers, sixteen times the
	// bytes that announced them.
	if k <= 0 || n > uint64(len(p)-k) || n > maxWaitKeys {
		return nil, fmt.Errorf("%w: bad key count", errMalformed)
	}
	p = p[k:]
	keys := make([]string, n)
	for i := range keys {
		var err error
		if keys[i], p, err = splitKey(p); err != nil {
			return nil, err
		}
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last key", errMalformed, len(p))
	}
	return keys, nil
}

func encodeWait(keys []string) []byte {
	p := binary.AppendUvarint(nil, uint64(len(keys)))
	for _, k := range keys {
		p = appendKey(p, k)
	}
	return p
}

// helloPayload returns the client's opHello payload.
func helloPayload(version uint16, clientNonce []byte) []byte {
	p := append([]byte(protoMagic), 0, 0)
	binary.BigEndian.PutUint16(p[len(protoMagic):], version)
	return append(p, clientNonce...)
}

// proof is one side's evidence that it knows token.
func proof(token, role string, clientNonce, serverNonce []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("hcomm-store v2 " + role))
	m.Write(clientNonce)
	m.Write(serverNonce)
	return m.Sum(nil)
}

// responseError turns an error response into an error wrapping the matching
// sentinel.
func responseError(status byte, msg []byte) error {
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage]
	}
	text := fmt.Sprintf("%q", msg)
	text = text[1 : len(text)-1] // quoted for safety, without the quotes
	switch status {
	case statusOK:
		return nil
	case statusTooLarge:
		return fmt.Errorf("%w: %s", ErrTooLarge, text)
	case statusNotInteger:
		return fmt.Errorf("%w: %s", ErrNotInteger, text)
	case statusUnauthorized:
		return fmt.Errorf("%w: %s", ErrUnauthorized, text)
	case statusBadVersion:
		return fmt.Errorf("store: server refused protocol version: %s", text)
	case statusError:
		return fmt.Errorf("store: server: %s", text)
	default:
		return fmt.Errorf("store: server sent unknown status %d: %s", status, text)
	}
}
