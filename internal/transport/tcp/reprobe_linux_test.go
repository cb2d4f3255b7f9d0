package tcp

import (
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// joinListener is a net.Listener that hands out the connections of
// several listeners, more of which may be added while it is in use.
type joinListener struct {
	net.Listener // the first; its address is the joined listener's
	conns        chan net.Conn
	done         chan struct{}
	once         sync.Once
	mu           sync.Mutex
	lns          []net.Listener
}

func newJoinListener(first net.Listener) *joinListener {
	j := &joinListener{Listener: first, conns: make(chan net.Conn), done: make(chan struct{})}
	j.add(first)
	return j
}

// add starts handing out ln's connections too.
func (j *joinListener) add(ln net.Listener) {
	j.mu.Lock()
	j.lns = append(j.lns, ln)
	j.mu.Unlock()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case j.conns <- nc:
			case <-j.done:
				nc.Close()
				return
			}
		}
	}()
}

func (j *joinListener) Accept() (net.Conn, error) {
	select {
	case nc := <-j.conns:
		return nc, nil
	case <-j.done:
		return nil, net.ErrClosed
	}
}

func (j *joinListener) Close() error {
	j.once.Do(func() { close(j.done) })
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, ln := range j.lns {
		ln.Close()
	}
	return nil
}

// TestPathReprobe: an extra address that gives no answer when the pair
// connects (its connection requests are dropped, as with a lost first
// SYN or a link down at start) is not given up for the job: the dialer
// keeps dialing it in the background, and once it answers, the path
// joins and carries stripes both ways.
func TestPathReprobe(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(fmt.Sprintf("nsocks=%d", nsocks), func(t *testing.T) {
			logs := new(syncBuffer)
			var lns [2]net.Listener
			for r := range lns {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				lns[r] = ln
			}
			deaf, closeDeaf := deafListener(t, "127.0.0.3")
			join := newJoinListener(lns[1])
			lns[1] = join
			addrs := []string{lns[0].Addr().String(), lns[1].Addr().String() + "," + deaf}
			trs := pathTransports(t, lns[:], addrs, nsocks, 20*time.Second, logs)
			trs[0].reprobeMax = 50 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			runAll(t, trs, func(tr *Transport) error { return tr.Connect(ctx, []int{1 - tr.rank}) })
			for r, tr := range trs {
				for _, s := range tr.Paths() {
					if s.Path == 1 && (s.Up || !s.Retired || s.Sent != 0) {
						t.Fatalf("rank %d: the deaf path is in use: %v", r, s)
					}
				}
			}
			sendOne(ctx, t, trs, 0, 0, 1<<20)
			if l := logs.String(); !strings.Contains(l, "path does not reach the peer; dropped") {
				t.Fatalf("no log line for the path dropped:\n%s", l)
			}
			// The address starts answering: the peer's listener is
			// reached there now.
			closeDeaf()
			ln, err := net.Listen("tcp", deaf)
			if err != nil {
				t.Fatal(err)
			}
			join.add(ln)
			for i := 1; ; i++ {
				for from := range 2 {
					sendOne(ctx, t, trs, from, 2*i+from, []int{100, stripeMin, 1 << 20}[i%3])
				}
				used := 0
				for _, tr := range trs {
					for _, s := range tr.Paths() {
						if s.Path == 1 && s.Up && !s.Retired && s.Gen > 0 && s.Sent > 0 && s.Received > 0 {
							used++
						}
					}
				}
				if used == 2 {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("the path did not join:\n%v\n%v\n%s", trs[0].Paths(), trs[1].Paths(), logs.String())
				}
			}
			if l := logs.String(); !strings.Contains(l, "dialing a dropped path again") || !strings.Contains(l, "dropped path reached and in use") {
				t.Errorf("no log lines for the path dialed again and joining:\n%s", l)
			}
		})
	}
}

// TestRejoinShare: a path that rejoins carries a stripe of every striped
// message from then on, not only of one a second (a share below minShare
// is tried only every reprobeEvery), so its estimate is measured at every
// sample.
func TestRejoinShare(t *testing.T) {
	p0, p1 := &path{idx: 0}, &path{idx: 1}
	c0, c1 := &conn{path: p0, pos: 0}, &conn{path: p1, pos: 1}
	p0.conns, p1.conns = []*conn{c0}, []*conn{c1}
	pr := &peer{paths: []*path{p0, p1}, conns: []*conn{c0, c1}, cut: make([]uint64, 2)}
	p0.setRate(400e6)
	p1.setRate(pr.rejoinRate(p1))
	now := time.Now()
	for i := range 10 {
		mask := pr.plan(1<<20, now.Add(time.Duration(i)*10*time.Millisecond))
		if mask&2 == 0 || pr.cut[1] == 0 {
			t.Fatalf("send %d: the rejoined path carries nothing (paths %#x, cut %v, share %.3f)", i, mask, pr.cut, math.Float64frombits(p1.share.Load()))
		}
	}
	if s := math.Float64frombits(p1.share.Load()); s < rejoinShare*0.99 || s > rejoinShare*1.01 {
		t.Errorf("share %.4f, want %.4f", s, rejoinShare)
	}
}
