package store

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeConn is a net.Conn that reads from a fixed input and discards what is
// written to it.
type fakeConn struct {
	r      io.Reader
	mu     sync.Mutex
	closed bool
}

func newFakeConn(data []byte) *fakeConn { return &fakeConn{r: bytes.NewReader(data)} }

func (c *fakeConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.r.Read(p)
}

func (c *fakeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

type fakeAddr struct{}

func (fakeAddr) Network() string { return "fake" }
func (fakeAddr) String() string  { return "fake" }

func (c *fakeConn) LocalAddr() net.Addr              { return fakeAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return fakeAddr{} }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// requestSeeds are well-formed request streams.
func requestSeeds() [][]byte {
	var s [][]byte
	s = append(s, appendFrame(nil, opSet, 1, append(appendKey(nil, "k"), "v"...)))
	stream := appendFrame(nil, opGet, 2, []byte("k"))
	stream = appendFrame(stream, opWait, 3, encodeWait([]string{"a", "b", "a"}))
	stream = appendFrame(stream, opAdd, 4, encodeAdd("a", 5))
	stream = appendFrame(stream, opSet, 5, append(appendKey(nil, "b"), "x"...))
	stream = appendFrame(stream, opSet, 6, append(appendKey(nil, "k"), "v"...))
	stream = appendFrame(stream, opDelete, 7, []byte("k"))
	stream = appendFrame(stream, opGet, 8, []byte("zz"))
	stream = appendFrame(stream, opCancel, 8, nil)
	stream = appendFrame(stream, opAdd, 9, encodeAdd("b", 1))
	s = append(s, stream)
	s = append(s, appendFrame(nil, opHello, 0, helloPayload(protoVersion, make([]byte, nonceSize))))
	// A hello and a client proof (wrong, as the fuzzer cannot know the
	// server's nonce), and a Wait naming more keys than allowed.
	hs := appendFrame(nil, opHello, 0, helloPayload(protoVersion, make([]byte, nonceSize)))
	s = append(s, appendFrame(hs, opAuth, 0, make([]byte, proofSize)))
	s = append(s, appendFrame(nil, opWait, 1, binary.AppendUvarint(nil, maxWaitKeys+1)))
	s = append(s, appendFrame(nil, opWait, 1, append(binary.AppendUvarint(nil, 64), make([]byte, 64)...)))
	s = append(s, append(binary.AppendUvarint(nil, 1<<40), opSet, 1))
	return s
}

// FuzzServerFrames feeds arbitrary bytes to the server, both as a new
// connection (handshake first) and as an authenticated one. The server must
// neither panic nor hang, and must release everything the connection held.
func FuzzServerFrames(f *testing.F) {
	for _, s := range requestSeeds() {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		srv, err := NewServer(ServerConfig{Token: testToken, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		for _, authed := range []bool{false, true} {
			c := newServerConn(srv, newFakeConn(data))
			srv.lmu.Lock()
			srv.conns[c] = struct{}{}
			if authed {
				c.authed = true
				srv.authed++
			} else {
				srv.bySource[c.source] = list.New()
				c.inAll = srv.pending.PushBack(c)
				c.inSource = srv.bySource[c.source].PushBack(c)
			}
			srv.lmu.Unlock()
			srv.wg.Add(1)
			func() {
				defer srv.wg.Done()
				if authed {
					defer srv.dropConn(c)
					defer c.close()
					srv.serveRequests(c, bufio.NewReader(c.conn))
				} else {
					srv.serveConn(c)
				}
			}()
		}
		srv.mu.Lock()
		defer srv.mu.Unlock()
		if len(srv.waiters) != 0 {
			t.Fatalf("%d keys still have waiters after their connections ended", len(srv.waiters))
		}
		var stored int64
		for k, v := range srv.data {
			stored += entryCost(k, v)
		}
		if srv.reading != 0 {
			t.Fatalf("%d bytes still reserved for frames being read", srv.reading)
		}
		if srv.held != stored {
			t.Fatalf("server charges %d bytes for %d bytes of data and no parked calls", srv.held, stored)
		}
		srv.lmu.Lock()
		defer srv.lmu.Unlock()
		if srv.pending.Len() != 0 || srv.authed != 0 || len(srv.bySource) != 0 {
			t.Fatalf("connection counts after every connection ended: %d pending (%d sources), %d authenticated", srv.pending.Len(), len(srv.bySource), srv.authed)
		}
	})
}

// FuzzClientFrames feeds arbitrary bytes to the client as the server's side
// of the handshake and as responses.
func FuzzClientFrames(f *testing.F) {
	okHello := appendFrame(nil, statusOK, 0, binary.BigEndian.AppendUint16(make([]byte, 0, 2+nonceSize), protoVersion)[:2+nonceSize])
	f.Add(append(okHello, appendFrame(nil, statusOK, 0, make([]byte, proofSize))...))
	f.Add(append(okHello, appendFrame(nil, statusError, 0, []byte("server has 1 clients"))...))
	f.Add(appendFrame(nil, statusUnauthorized, 0, []byte("wrong job token")))
	f.Add(appendFrame(nil, statusBadVersion, 0, []byte("version")))
	responses := appendFrame(nil, statusOK, 1, []byte("value"))
	responses = appendFrame(responses, statusOK, 2, binary.BigEndian.AppendUint64(nil, 42))
	responses = appendFrame(responses, statusNotInteger, 3, []byte("no"))
	responses = appendFrame(responses, 77, 4, []byte("\xff\x00"))
	f.Add(responses)
	f.Add(append(binary.AppendUvarint(nil, 1<<40), statusOK, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The handshake.
		conn := newFakeConn(data)
		clientHandshake(context.Background(), conn, bufio.NewReader(conn), testToken)

		// Response decoding, frame by frame.
		br := bufio.NewReader(bytes.NewReader(data))
		for {
			fr, err := readFrame(br, 1<<20)
			if err != nil {
				break
			}
			responseError(fr.kind, fr.payload)
			decodeAddResponse(fr)
		}

		// A live client reading the same bytes, with calls pending.
		conn = newFakeConn(data)
		c := newClient(conn, bufio.NewReader(conn), "fake", 1<<20)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { c.Get(ctx, "k") })
		}
		wg.Go(func() { c.Add(ctx, "n", 1) })
		wg.Wait() // the input ends, so every call must fail or finish
		c.Close()
	})
}

// FuzzFileKey checks that file names of keys are injective, invertible
// when not hashed, and always a single safe element inside the directory.
func FuzzFileKey(f *testing.F) {
	for _, s := range []string{"", "a", "A", "..", "../x", "/", "a/b", "%", "%2f", ".lock", "\x00", "ключ", strings.Repeat("x", 250)} {
		f.Add(s, "a")
	}
	const dir = "/store/dir"
	f.Fuzz(func(t *testing.T, a, b string) {
		na, nb := fileName(a), fileName(b)
		if (a == b) != (na == nb) {
			t.Fatalf("keys %q, %q map to names %q, %q", a, b, na, nb)
		}
		for _, n := range []string{na, nb} {
			if n == "" || len(n) > 255 || n[0] == '.' || strings.ContainsAny(n, "/\\:\x00") || n != strings.ToLower(n) {
				t.Fatalf("unsafe file name %q", n)
			}
			if p := filepath.Join(dir, n); filepath.Dir(p) != dir || filepath.Base(p) != n {
				t.Fatalf("name %q escapes the directory: %q", n, p)
			}
		}
		if k, ok := keyFromFileName(na); ok && k != a {
			t.Fatalf("fileName(%q) = %q decodes to %q", a, na, k)
		} else if !ok && na[0] == 'k' {
			t.Fatalf("fileName(%q) = %q does not decode", a, na)
		}
	})
}
