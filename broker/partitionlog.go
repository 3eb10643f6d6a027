package broker

import (
	"context"
	"log/slog"
	"sync"
)

// partitionHandler is one partition's log handler: its topic's, with the
// partition attribute added at the partition's first record rather than
// when the partition is opened. It writes what
// topic.With("partition", index) would; a topic of thousands of
// partitions, most of which never log, then costs two small objects per
// partition instead of a handler's attributes each.
type partitionHandler struct {
	topic slog.Handler // the topic's partitions' handler (partitionLogger)
	index int32

	once sync.Once
	h    slog.Handler // topic with the partition attribute, made by handler
}

// newPartitionLogger returns the logger of partition index of a topic
// whose partitions log through topic.
func newPartitionLogger(topic *slog.Logger, index int32) *slog.Logger {
	return slog.New(&partitionHandler{topic: topic.Handler(), index: index})
}

func (p *partitionHandler) handler() slog.Handler {
	p.once.Do(func() {
		p.h = p.topic.WithAttrs([]slog.Attr{slog.Int("partition", int(p.index))})
	})
	return p.h
}

// Enabled is the topic's: the partition attribute names no logger.
func (p *partitionHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return p.topic.Enabled(ctx, l)
}

func (p *partitionHandler) Handle(ctx context.Context, r slog.Record) error {
	return p.handler().Handle(ctx, r)
}

func (p *partitionHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return p.handler().WithAttrs(as)
}

func (p *partitionHandler) WithGroup(g string) slog.Handler {
	return p.handler().WithGroup(g)
}
