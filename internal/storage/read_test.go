package storage

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

func TestReadBounds(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), dir, Config{IndexInterval: 300})
	defer l.Close()
	a := newAppender(t, l)
	var starts []int64 // base offset of each batch
	for i := 0; i < 50; i++ {
		starts = append(starts, a.next)
		a.add(3, 100, int64(i)) // every batch holds 3 offsets
	}
	size := a.sizes[0] // all batches have the same size
	cases := []struct {
		name           string
		offset, limit  int64
		maxBytes       int
		wantFirst      int64 // base offset of the first batch returned
		wantBatches    int
		wantErrOutside bool
	}{
		{"whole log", 0, 150, 1 << 20, 0, 50, false},
		{"middle of a batch", 31, 150, 1 << 20, 30, 40, false},
		{"limit cuts whole batches", 0, 30, 1 << 20, 0, 10, false},
		{"limit inside a batch excludes it", 0, 31, 1 << 20, 0, 10, false},
		{"maxBytes", 3, 150, 4*size + size/2, 3, 4, false},
		{"maxBytes smaller than one batch", 9, 150, 1, 9, 1, false},
		{"at the limit", 30, 30, 1 << 20, 0, 0, false},
		{"at the end", 150, 150, 1 << 20, 0, 0, false},
		{"past the end", 151, 200, 1 << 20, 0, 0, true},
		{"negative", -1, 150, 1 << 20, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := l.Read(c.offset, c.limit, c.maxBytes)
			if c.wantErrOutside {
				if !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("err = %v, want ErrOffsetOutOfRange", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			if _, err := batch.Split(b, func(h batch.Header, _ []byte) error {
				got = append(got, h.BaseOffset)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) != c.wantBatches || (len(got) > 0 && got[0] != c.wantFirst) {
				t.Fatalf("got batches at %v, want %d starting at %d", got, c.wantBatches, c.wantFirst)
			}
			if first, next := s.Offsets(); len(got) > 0 && (first != got[0] || next != got[len(got)-1]+3) {
				t.Fatalf("Offsets() = %d, %d; batches at %v hold 3 offsets each", first, next, got)
			} else if len(got) == 0 && next != first {
				t.Fatalf("Offsets() of an empty slice = %d, %d", first, next)
			}
			if len(got) > 0 {
				i := int(c.wantFirst / 3)
				want := a.data[i*size : (i+len(got))*size]
				if !bytes.Equal(b, want) {
					t.Fatal("bytes differ from what was appended")
				}
			}
		})
	}
}

func TestOffsetForTimeAndMaxTimestamp(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), dir, Config{SegmentBytes: 2 << 10, IndexInterval: 200})
	defer l.Close()
	a := newAppender(t, l)
	// Timestamps rise with a dip: batch i has max timestamp ts[i].
	var ts, base []int64
	for i := 0; i < 60; i++ {
		t0 := int64(1000 + 10*i)
		if i == 30 {
			t0 = 500 // an out-of-order batch
		}
		base = append(base, a.next)
		a.add(2, 80, t0)
		ts = append(ts, t0+1)
	}
	if l.Segments() < 3 {
		t.Fatalf("want several segments, have %d", l.Segments())
	}
	// Reference: the first batch whose max timestamp is >= q.
	want := func(q int64) int64 {
		for i := range ts {
			if ts[i] >= q {
				return base[i]
			}
		}
		return l.NextOffset()
	}
	for _, q := range []int64{-1, 0, 501, 502, 1000, 1001, 1002, 1005, 1295, 1300, 1301, 1500, 1591, 1592, 10_000} {
		got, err := l.OffsetForTime(q)
		if err != nil {
			t.Fatal(err)
		}
		if got != want(q) {
			t.Errorf("OffsetForTime(%d) = %d, want %d", q, got, want(q))
		}
	}
	if mts, off := l.MaxTimestamp(); mts != ts[59] || off != base[59] {
		t.Fatalf("MaxTimestamp = %d at %d, want %d at %d", mts, off, ts[59], base[59])
	}
	// The same after a clean reopen, from the index files.
	m := l.fs
	l.Close()
	l = mustOpen(t, m, dir, Config{SegmentBytes: 2 << 10, IndexInterval: 200})
	defer l.Close()
	for _, q := range []int64{501, 1002, 1301, 1591} {
		if got, _ := l.OffsetForTime(q); got != want(q) {
			t.Errorf("after reopen OffsetForTime(%d) = %d, want %d", q, got, want(q))
		}
	}
	if mts, off := l.MaxTimestamp(); mts != ts[59] || off != base[59] {
		t.Fatalf("after reopen MaxTimestamp = %d at %d", mts, off)
	}
}

func TestScanHeaders(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), dir, Config{SegmentBytes: 1 << 10, IndexInterval: 128})
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 40; i++ {
		a.add(1+i%3, 60, int64(i))
	}
	for _, from := range []int64{0, 1, 17, 50, a.next - 1, a.next} {
		var got []int64
		if err := l.ScanHeaders(from, func(h batch.Header) error {
			got = append(got, h.LastOffset())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var want []int64
		if _, err := batch.Split(a.data, func(h batch.Header, _ []byte) error {
			if h.LastOffset() >= from {
				want = append(want, h.LastOffset())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || (len(got) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
			t.Fatalf("from %d: got last offsets %v, want %v", from, got, want)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := l.ScanHeaders(0, func(batch.Header) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("ScanHeaders did not stop at the first error: %v after %d", err, n)
	}
}

func TestRollAndRetention(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	clock := func() time.Time { return now }
	cfg := Config{SegmentBytes: 1 << 10, SegmentAge: time.Hour, RetentionBytes: 3 << 10, RetentionAge: 24 * time.Hour, Now: clock}
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, cfg)
	defer l.Close()
	a := newAppender(t, l)
	ms := func() int64 { return now.UnixMilli() }

	// Size: each batch is ~350 bytes, so a segment takes two.
	for i := 0; i < 20; i++ {
		a.add(1, 280, ms())
	}
	if n := l.Segments(); n != 10 {
		t.Fatalf("%d segments after 20 batches of ~350 bytes with 1 KiB segments, want 10", n)
	}
	// Age: a young segment is not rolled, an old one is.
	a.add(1, 10, ms())
	before := l.Segments()
	now = now.Add(59 * time.Minute)
	a.add(1, 10, ms())
	if l.Segments() != before {
		t.Fatal("rolled a segment younger than SegmentAge")
	}
	now = now.Add(2 * time.Minute)
	a.add(1, 10, ms())
	if l.Segments() != before+1 {
		t.Fatal("did not roll a segment older than SegmentAge")
	}

	// Bytes: keep at least RetentionBytes.
	total := l.Size()
	removed, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if removed == 0 || l.Size() < cfg.RetentionBytes || l.Size() > cfg.RetentionBytes+1<<10 {
		t.Fatalf("removed %d segments: %d -> %d bytes, retention %d", removed, total, l.Size(), cfg.RetentionBytes)
	}
	start := l.StartOffset()
	if start == 0 {
		t.Fatal("StartOffset did not advance")
	}
	if _, err := l.Read(start-1, a.next, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below StartOffset: %v", err)
	}
	if got := readAll(t, l, start); !bytes.Equal(got, a.data[len(a.data)-len(got):]) || int64(len(got)) != l.Size() {
		t.Fatal("remaining data differs")
	}
	names, _ := m.ReadDir(dir)
	for _, n := range names {
		if base, ok := parseSegmentName(n); ok && base < start {
			t.Fatalf("segment file %s below StartOffset %d still present", n, start)
		}
	}

	// Age: everything older than RetentionAge goes, except the active segment.
	now = now.Add(25 * time.Hour)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 1 || l.StartOffset() != l.active().base {
		t.Fatalf("%d segments left after age retention, start %d", l.Segments(), l.StartOffset())
	}
	// Retention survives a reopen.
	next := l.NextOffset()
	start = l.StartOffset()
	l.Close()
	l = mustOpen(t, m, dir, cfg)
	defer l.Close()
	if l.StartOffset() != start || l.NextOffset() != next {
		t.Fatalf("after reopen [%d, %d), want [%d, %d)", l.StartOffset(), l.NextOffset(), start, next)
	}
}

// TestRetentionUnderReaders races readers against retention: a reader
// either reads correct bytes or gets ErrOffsetOutOfRange, never a closed
// file or wrong data.
func TestRetentionUnderReaders(t *testing.T) {
	cfg := Config{SegmentBytes: 1 << 10, RetentionBytes: 2 << 10}
	l := mustOpen(t, vfs.NewMem(), dir, cfg)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 10; i++ {
		a.add(1, 300, int64(i))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	data := func() []byte { mu.Lock(); defer mu.Unlock(); return a.data }
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := l.StartOffset()
				s, err := l.Read(start, l.NextOffset(), 1<<20)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				b, err := s.Bytes()
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue
				}
				if err != nil || !bytes.Contains(data(), b) {
					t.Errorf("read %d bytes: %v (contained: %v)", len(b), err, err == nil)
					return
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		mu.Lock()
		a.add(1, 300, int64(i))
		mu.Unlock()
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestSendfileOverTCP(t *testing.T) {
	l := mustOpen(t, vfs.OS(), t.TempDir(), Config{})
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 200; i++ {
		a.add(4, 1000, int64(i))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	c, got := tcpSink(t)
	// Two slices from different positions, to show the file position is
	// not shared: the second starts mid-file.
	s1, err := l.Read(0, a.next, len(a.data)/2)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := l.Read(400, a.next, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	before := sendfileBytes.Load()
	n1, err := s1.WriteTo(c)
	if err != nil || n1 != int64(s1.Len()) {
		t.Fatalf("WriteTo = %d, %v; want %d", n1, err, s1.Len())
	}
	n2, err := s2.WriteTo(c)
	if err != nil || n2 != int64(s2.Len()) {
		t.Fatalf("WriteTo = %d, %v; want %d", n2, err, s2.Len())
	}
	c.Close()
	b := <-got
	b2, _ := s2.Bytes()
	want := append(append([]byte(nil), a.data[:s1.Len()]...), b2...)
	if !bytes.Equal(b, want) {
		t.Fatalf("received %d bytes, want %d, contents differ", len(b), len(want))
	}
	if sent := sendfileBytes.Load() - before; sent != n1+n2 {
		t.Fatalf("sendfile carried %d of %d bytes", sent, n1+n2)
	}
	// Any other writer gets the copy path and the same bytes.
	var buf bytes.Buffer
	if _, err := s2.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), b2) {
		t.Fatalf("copy path: %v", err)
	}
}

// TestRetentionKeepsRetainFrom: age retention stops at the segment that
// holds Config.RetainFrom (an open transaction's first offset) and moves
// on once it advances.
func TestRetentionKeepsRetainFrom(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	keep := int64(5)
	cfg := Config{SegmentBytes: 1 << 10, RetentionAge: time.Hour, Now: func() time.Time { return now },
		RetainFrom: func() int64 { return keep }}
	l := mustOpen(t, vfs.NewMem(), dir, cfg)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 20; i++ {
		a.add(1, 280, now.UnixMilli()) // two batches (offsets) per segment
	}
	now = now.Add(2 * time.Hour)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if start := l.StartOffset(); start != 4 {
		t.Fatalf("start offset %d after retention with RetainFrom 5, want 4 (the segment holding 5 stays)", start)
	}
	keep = 100
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 1 {
		t.Fatalf("%d segments left once RetainFrom moved past them, want 1", l.Segments())
	}
}

// tcpSink returns a loopback TCP connection and a channel that receives
// everything written to it once it is closed (nil if the accept failed).
func tcpSink(t *testing.T) (net.Conn, <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}
