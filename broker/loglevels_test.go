package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logSink is the broker's log output, which a test waits on.
type logSink struct {
	mu    sync.Mutex // guards buf and wrote
	buf   bytes.Buffer
	wrote chan struct{} // closed and replaced at each write
}

func newLogSink() *logSink { return &logSink{wrote: make(chan struct{})} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	close(s.wrote)
	s.wrote = make(chan struct{})
	return len(p), nil
}

// lines returns the lines written so far holding every one of subs.
func (s *logSink) lines(subs ...string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.buf.String(), "\n") {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(l, sub)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// waitLine waits for a line holding every one of subs.
func (s *logSink) waitLine(t *testing.T, subs ...string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		ch := s.wrote
		s.mu.Unlock()
		if ls := s.lines(subs...); len(ls) > 0 {
			return ls[0]
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no log line with %q in:\n%s", subs, s.buf.String())
		}
	}
}

func loggerLevels(t *testing.T, cl *kgo.Client) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "0"}}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe loggers: %+v, %v", resp, err)
	}
	out := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		if c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
			t.Errorf("logger %s source %v", c.Name, c.Source)
		}
		out[c.Name] = *c.Value
	}
	return out
}

func alterLoggers(t *testing.T, cl *kgo.Client, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "0", Configs: ops}}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0]
}

func setOp(name, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	return kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: name, Op: kmsg.IncrementalAlterConfigOpSet, Value: &v}
}

// TestBrokerLoggerLevels: DescribeConfigs shows each logger's level, and
// IncrementalAlterConfigs changes it at run time: the broker's output
// gains the connection logger's DEBUG lines once it is set to DEBUG,
// and loses them once DELETE returns it to root's INFO.
func TestBrokerLoggerLevels(t *testing.T) {
	sink := newLogSink()
	// LogRequests: each request is logged at DEBUG by the connection
	// logger (as Kafka's kafka.request.logger), so its level decides.
	tb := startTest(t, LogRequests(true), Logger(slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	cl := tb.client()
	levels := loggerLevels(t, cl)
	for _, n := range loggerNames {
		if levels[n] != "INFO" {
			t.Fatalf("logger %s at %q, want INFO (the handler's level): %v", n, levels[n], levels)
		}
	}
	if ls := sink.lines("msg=request"); len(ls) > 0 {
		t.Fatalf("DEBUG request lines at INFO: %q", ls)
	}
	if sr := alterLoggers(t, cl, setOp("conn", "debug")); sr.ErrorCode != 0 {
		t.Fatalf("set conn DEBUG: %v %s", kerr.ErrorForCode(sr.ErrorCode), ptrStr(sr.ErrorMessage))
	}
	sink.waitLine(t, `msg="log level changed"`, "logger=conn", "level=DEBUG")
	if got := loggerLevels(t, cl); got["conn"] != "DEBUG" || got["root"] != "INFO" || got["wal"] != "INFO" {
		t.Fatalf("after SET: %v", got)
	}
	// The connection logger's DEBUG lines now reach the output: each
	// request is logged once answered.
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	sink.waitLine(t, "level=DEBUG", "component=conn", "msg=request", "api=Metadata")

	// Refusals: root cannot be deleted, unknown loggers and levels, list
	// operations, AlterConfigs.
	for _, tc := range []struct {
		op   kmsg.IncrementalAlterConfigsRequestResourceConfig
		code *kerr.Error
	}{
		{kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "root", Op: kmsg.IncrementalAlterConfigOpDelete}, kerr.InvalidConfig},
		{setOp("kafka.server.KafkaApis", "DEBUG"), kerr.InvalidConfig},
		{setOp("conn", "LOUD"), kerr.InvalidConfig},
		{kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "conn", Op: kmsg.IncrementalAlterConfigOpAppend, Value: strPtr("DEBUG")}, kerr.InvalidRequest},
	} {
		if sr := alterLoggers(t, cl, tc.op); sr.ErrorCode != tc.code.Code {
			t.Errorf("%s %v: %v, want %v", tc.op.Name, tc.op.Op, kerr.ErrorForCode(sr.ErrorCode), tc.code)
		}
	}
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "0", Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "conn", Value: strPtr("INFO")}}}}
	if resp, err := ac.RequestWith(t.Context(), cl); err != nil || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("AlterConfigs of a logger: %+v, %v", resp, err)
	}

	// DELETE returns conn to root's level; root to WARN quiets every
	// logger without a level of its own.
	if sr := alterLoggers(t, cl, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "conn", Op: kmsg.IncrementalAlterConfigOpDelete}, setOp("root", "WARN")); sr.ErrorCode != 0 {
		t.Fatalf("delete conn, root WARN: %v %s", kerr.ErrorForCode(sr.ErrorCode), ptrStr(sr.ErrorMessage))
	}
	if got := loggerLevels(t, cl); got["conn"] != "WARN" || got["root"] != "WARN" || got["groups"] != "WARN" {
		t.Fatalf("after DELETE and root WARN: %v", got)
	}
	before := len(sink.lines("msg=request"))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	// A later line of the broker's bounds the wait; the connection
	// logger, at WARN, must have added nothing.
	// (root back to INFO, which lets the change's own INFO line out and
	// keeps conn's DEBUG lines out).
	if sr := alterLoggers(t, cl, setOp("root", "INFO")); sr.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(sr.ErrorCode))
	}
	sink.waitLine(t, "logger=root", "level=INFO")
	if after := len(sink.lines("msg=request")); after != before {
		t.Fatalf("%d new DEBUG request lines with conn at WARN", after-before)
	}
}

// TestLevelHandlerDeferredAttrs: attributes added by With (given to the
// wrapped handler only when a record is written) come out as slog's own
// handler writes them, in order, groups included.
func TestLevelHandlerDeferredAttrs(t *testing.T) {
	var got, want bytes.Buffer
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	_, h := newLogLevels(slog.NewTextHandler(&got, opts))
	logs := func(l *slog.Logger) {
		p := l.With("component", "partition").With("topic", "t", "partition", 1)
		p.Info("first", "k", 1)
		p.WithGroup("g").With("x", 2).Info("grouped", "k", 3)
		l.With("topic", "u").Warn("other")
	}
	logs(slog.New(h))
	logs(slog.New(slog.NewTextHandler(&want, opts)))
	if got.String() != want.String() {
		t.Fatalf("logged\n%s\nwant\n%s", got.String(), want.String())
	}
	if !strings.Contains(got.String(), "component=partition topic=t partition=1 g.x=2 g.k=3") {
		t.Fatalf("attributes missing: %s", got.String())
	}
}
