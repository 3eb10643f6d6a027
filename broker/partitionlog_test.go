package broker

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestPartitionLoggerWritesWhatWithDoes: a partition's logger writes,
// record for record, what its topic's logger With the partition
// attribute writes, through the broker's level handler and without it,
// with groups and attributes added later, and drops what the topic's
// level drops; making one costs at most two allocations.
func TestPartitionLoggerWritesWhatWithDoes(t *testing.T) {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	write := func(l *slog.Logger) {
		l.Info("opened", "offset", int64(42))
		l.Debug("dropped at info")
		l.WithGroup("g").Info("grouped", "x", 2)
		l.With("y", 3).Warn("with", "z", 4)
		l.With("y", 3).WithGroup("h").With("w", 5).Error("deep")
	}
	for _, leveled := range []bool{false, true} {
		var want, got bytes.Buffer
		topicOf := func(buf *bytes.Buffer) *slog.Logger {
			var h slog.Handler = slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: noTime})
			if leveled {
				_, h = newLogLevels(h)
			}
			return slog.New(h).With("component", "partition").With("topic", "orders")
		}
		write(topicOf(&want).With("partition", int32(7)))
		write(newPartitionLogger(topicOf(&got), 7))
		if want.String() != got.String() {
			t.Fatalf("leveled %v: the partition logger wrote\n%s\nwant\n%s", leveled, got.String(), want.String())
		}
		if bytes.Contains(want.Bytes(), []byte("dropped")) || !bytes.Contains(want.Bytes(), []byte("partition=7")) {
			t.Fatalf("leveled %v: unexpected output\n%s", leveled, want.String())
		}
	}
	topic := slog.New(slog.DiscardHandler).With("topic", "orders")
	if n := testing.AllocsPerRun(100, func() { _ = newPartitionLogger(topic, 7) }); n > 2 {
		t.Errorf("a partition logger costs %v allocations, want at most 2", n)
	}
}
