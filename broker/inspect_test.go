package broker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

func TestReadiness(t *testing.T) {
	fs := vfs.NewMem()
	b, err := New(withFS(fs), DataDir("/data"), ListenAddr("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Ready(); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("Ready before Start = %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(); err != nil {
		t.Fatalf("Ready after Start = %v", err)
	}
	ctx := context.Background()
	if err := b.CreateTopic(ctx, "t", 2, nil); err != nil {
		t.Fatal(err)
	}
	var full bool
	b.AddReadinessCheck("disk guard", func() error {
		if full {
			return errors.New("disk full")
		}
		return nil
	})
	full = true
	if err := b.Ready(); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "disk guard: disk full") {
		t.Fatalf("Ready with a failing check = %v", err)
	}
	full = false
	if err := b.Ready(); err != nil {
		t.Fatalf("Ready after the check cleared = %v", err)
	}

	// A failed fsync stops partition t/1: not ready, naming it.
	fs.Inject(vfs.FailNth(vfs.OpSync, fs.Ops(vfs.OpSync)+1, syscall.EIO, true))
	if _, err := b.AppendBatch(ctx, "t", 1, storagetest.MakeBatch(1, 10, 1), -1); err == nil {
		t.Fatal("append with a failing fsync succeeded")
	}
	err = b.Ready()
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "partition t/1 is not open") || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Ready with a failed partition = %v", err)
	}
	ti, _ := b.Topic("t")
	if ti.Partitions[1].Error == "" || ti.Partitions[0].Error != "" {
		t.Fatalf("partition errors = %q, %q", ti.Partitions[0].Error, ti.Partitions[1].Error)
	}
	fs.Inject(nil)
	b.Close()
	if err := b.Ready(); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("Ready after Close = %v", err)
	}
}

func TestInspect(t *testing.T) {
	tb := startTest(t)
	b := tb.b
	ctx := context.Background()
	if err := b.CreateTopic(ctx, "a", 2, map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	batch := storagetest.MakeBatch(5, 20, 1)
	for i := 0; i < 3; i++ {
		if _, err := b.AppendBatch(ctx, "a", 1, batch, -1); err != nil {
			t.Fatal(err)
		}
	}
	ti, ok := b.Topic("a")
	if !ok || len(ti.Partitions) != 2 {
		t.Fatalf("Topic = %+v, %v", ti, ok)
	}
	p := ti.Partitions[1]
	if p.HighWatermark != 15 || p.StartOffset != 0 || p.Segments != 1 || p.SizeBytes != int64(3*len(batch)) ||
		p.Traffic.RecordsIn != 15 || p.Traffic.BytesIn != int64(3*len(batch)) {
		t.Fatalf("partition 1 = %+v", p)
	}
	if ti.Config("retention.ms") != "1000" {
		t.Fatalf("retention.ms = %q", ti.Config("retention.ms"))
	}
	for _, c := range ti.Configs {
		want := "DEFAULT_CONFIG"
		if c.Name == "retention.ms" {
			want = "DYNAMIC_TOPIC_CONFIG"
		}
		if c.Source != want {
			t.Errorf("config %s source %s, want %s", c.Name, c.Source, want)
		}
	}
	records, size, tr := ti.Totals()
	if records != 15 || size != p.SizeBytes || tr.RecordsIn != 15 {
		t.Fatalf("totals = %d, %d, %+v", records, size, tr)
	}
	if _, ok := b.Topic("nope"); ok {
		t.Fatal("unknown topic found")
	}
	in := b.Info()
	if in.Topics != 1 || in.Partitions != 2 || in.DataBytes != size || in.Fsync != "always" || in.Version == "" || in.Addr != b.Addr() {
		t.Fatalf("Info = %+v", in)
	}
	st := b.Stats()
	if st.Traffic.RecordsIn != 15 || st.FsyncSeconds.Count == 0 || len(st.FsyncSeconds.Bounds) != len(st.FsyncSeconds.Counts) {
		t.Fatalf("Stats = %+v", st)
	}
	// Totals survive the topic's deletion; the topic's own view goes.
	if err := b.deleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Traffic.RecordsIn != 15 {
		t.Fatalf("records in after delete = %d", st.Traffic.RecordsIn)
	}
	if len(b.Topics()) != 0 {
		t.Fatal("deleted topic still listed")
	}
}

// syncBuf is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuf struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogRequests: request lines are logged at debug level only with
// LogRequests(true).
func TestLogRequests(t *testing.T) {
	for _, on := range []bool{false, true} {
		var buf syncBuf
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		tb := startTest(t, Logger(logger), LogRequests(on))
		healthy(t, tb.b.Addr())
		tb.stop() // the connection's lines are written before Close returns
		tb.b = nil
		got := strings.Contains(buf.String(), "msg=request component=conn remote=") && strings.Contains(buf.String(), "api=Metadata version=9")
		if got != on {
			t.Errorf("LogRequests(%v): request line logged %v:\n%s", on, got, buf.String())
		}
	}
}
