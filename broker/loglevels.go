package broker

// BROKER_LOGGER configs (resource type 8): the log level of each of
// Sluice's loggers, described with DescribeConfigs and changed at run
// time with IncrementalAlterConfigs, as Kafka's broker loggers are.
//
// Behaviour:
//   - The resource is named by the broker id, "0" (another id gets
//     INVALID_REQUEST); each config is a logger and its value a level:
//     OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE (ALL is TRACE).
//   - The loggers are "root" and one per component (loggerNames); a
//     component without a level of its own has root's. Records are
//     routed to their logger by the "component" attribute the broker
//     gives each component's logger; the rest are "broker"'s.
//   - SET gives a logger a level; DELETE returns it to root's (DELETE of
//     root gets INVALID_CONFIG); APPEND and SUBTRACT get INVALID_REQUEST.
//     An unknown logger or level gets INVALID_CONFIG; ValidateOnly
//     checks only. Levels are not persisted: a restart starts from the
//     configured handler's level, as Kafka's logger changes do.
//   - AlterConfigs (the non-incremental API) refuses BROKER_LOGGER with
//     INVALID_REQUEST, as Kafka does.
//   - DescribeConfigs lists every logger with its level in effect,
//     source DYNAMIC_BROKER_LOGGER_CONFIG. Both need DESCRIBE_CONFIGS /
//     ALTER_CONFIGS on the cluster.
//   - A level more verbose than the handler Sluice was given still
//     reaches it: the level checks here replace the handler's own.

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// loggerNames are the BROKER_LOGGER configs: root and the components.
var loggerNames = []string{"root", "broker", "cleaner", "conn", "groups", "partition", "txn", "wal"}

// componentLogger is the broker's logger for one component of
// loggerNames, whose level BROKER_LOGGER configs set.
func (b *Broker) componentLogger(name string) *slog.Logger {
	return b.cfg.logger.With("component", name)
}

// Kafka's level names and the slog levels they mean.
const (
	levelTrace = slog.LevelDebug - 4
	levelFatal = slog.LevelError + 4
	levelOff   = slog.Level(math.MaxInt32)
)

var kafkaLevels = []struct {
	name  string
	level slog.Level
}{
	{"OFF", levelOff}, {"FATAL", levelFatal}, {"ERROR", slog.LevelError}, {"WARN", slog.LevelWarn},
	{"INFO", slog.LevelInfo}, {"DEBUG", slog.LevelDebug}, {"TRACE", levelTrace},
}

func parseKafkaLevel(s string) (slog.Level, bool) {
	s = strings.ToUpper(s)
	if s == "ALL" {
		s = "TRACE"
	}
	for _, l := range kafkaLevels {
		if l.name == s {
			return l.level, true
		}
	}
	return 0, false
}

func kafkaLevelName(l slog.Level) string {
	for _, k := range kafkaLevels {
		if l >= k.level {
			return k.name
		}
	}
	return "TRACE"
}

// inherit marks a logger without a level of its own.
const inherit = math.MinInt64

// logLevels holds each logger's level. Loads and stores are atomic, so
// the handlers read them without a lock.
type logLevels struct {
	levels map[string]*atomic.Int64 // by logger name; fixed after newLogLevels
}

// newLogLevels wraps h so that records pass by the levels of
// BROKER_LOGGER; root starts at h's own minimum level.
func newLogLevels(h slog.Handler) (*logLevels, slog.Handler) {
	lv := &logLevels{levels: map[string]*atomic.Int64{}}
	for _, n := range loggerNames {
		v := &atomic.Int64{}
		v.Store(inherit)
		lv.levels[n] = v
	}
	root := levelOff
	for _, l := range []slog.Level{levelTrace, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if h.Enabled(context.Background(), l) {
			root = l
			break
		}
	}
	lv.levels["root"].Store(int64(root))
	return lv, &levelHandler{base: h, lv: lv, name: "broker"}
}

func (lv *logLevels) effective(name string) slog.Level {
	if v := lv.levels[name].Load(); v != inherit {
		return slog.Level(v)
	}
	return slog.Level(lv.levels["root"].Load())
}

// levelHandler routes records to their logger's level and hands those
// that pass to the wrapped handler. Attributes added by With are given to
// the wrapped handler only when the logger first writes a record: a
// logger made for each of thousands of partitions, most of which never
// log, then costs a few words instead of the handler's formatting.
type levelHandler struct {
	lv   *logLevels
	name string // the logger, from the component attribute

	base  slog.Handler // the wrapped handler, without attrs
	attrs []slog.Attr  // added since base, not yet given to it

	once  sync.Once
	inner slog.Handler // base with attrs (handler)
}

// handler returns the wrapped handler with the attributes added.
func (h *levelHandler) handler() slog.Handler {
	h.once.Do(func() {
		h.inner = h.base
		if len(h.attrs) > 0 {
			h.inner = h.base.WithAttrs(h.attrs)
		}
	})
	return h.inner
}

func (h *levelHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.lv.effective(h.name)
}

func (h *levelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h *levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	name := h.name
	for _, a := range as {
		if a.Key == "component" && slices.Contains(loggerNames, a.Value.String()) {
			name = a.Value.String()
		}
	}
	attrs := make([]slog.Attr, 0, len(h.attrs)+len(as))
	attrs = append(append(attrs, h.attrs...), as...)
	return &levelHandler{base: h.base, attrs: attrs, lv: h.lv, name: name}
}

func (h *levelHandler) WithGroup(g string) slog.Handler {
	return &levelHandler{base: h.handler().WithGroup(g), lv: h.lv, name: h.name}
}

// describeLoggers answers DescribeConfigs for a BROKER_LOGGER resource.
func (r *request) describeLoggers(d *describer, sr *kmsg.DescribeConfigsResponseResource) {
	switch {
	case !r.allowedCluster(opDescribeConfigs):
		sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case sr.ResourceName != "0":
		sr.ErrorCode = kerr.InvalidRequest.Code
		sr.ErrorMessage = strPtr("broker " + sr.ResourceName + " does not exist; this broker's id is 0")
	default:
		for _, n := range loggerNames {
			if !d.want(n) {
				continue
			}
			c := d.entry(n, kafkaLevelName(r.b.loggers.effective(n)), kmsg.ConfigTypeString, false,
				"the log level of Sluice's "+n+" logger", nil)
			c.Source, c.IsDefault = kmsg.ConfigSourceDynamicBrokerLoggerConfig, false
			sr.Configs = append(sr.Configs, c)
		}
	}
}

// alterLoggers applies IncrementalAlterConfigs operations to the
// BROKER_LOGGER resource name: all or none.
func (r *request) alterLoggers(name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if !r.allowedCluster(opAlterConfigs) {
		return errCode(kerr.ClusterAuthorizationFailed, "not authorized to alter broker loggers (ALTER_CONFIGS on the cluster)")
	}
	if name != "0" {
		return errCode(kerr.InvalidRequest, "broker %s does not exist; this broker's id is 0", name)
	}
	type change struct {
		name  string
		level int64
	}
	var changes []change
	for _, op := range ops {
		if !slices.Contains(loggerNames, op.Name) {
			return errCode(kerr.InvalidConfig, "logger %s does not exist; the loggers are %s", op.Name, strings.Join(loggerNames, ", "))
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			v := ""
			if op.Value != nil {
				v = *op.Value
			}
			l, ok := parseKafkaLevel(v)
			if !ok {
				return errCode(kerr.InvalidConfig, "cannot set logger %s to %q: the levels are OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE", op.Name, v)
			}
			changes = append(changes, change{op.Name, int64(l)})
		case kmsg.IncrementalAlterConfigOpDelete:
			if op.Name == "root" {
				return errCode(kerr.InvalidConfig, "removing the log level of the root logger is not allowed")
			}
			changes = append(changes, change{op.Name, inherit})
		default:
			return errCode(kerr.InvalidRequest, "operation %s is not allowed for broker loggers; use SET or DELETE", op.Op)
		}
	}
	if validateOnly {
		return nil
	}
	for _, c := range changes {
		r.b.loggers.levels[c.name].Store(c.level)
		level := "root's"
		if c.level != inherit {
			level = kafkaLevelName(slog.Level(c.level))
		}
		r.b.cfg.logger.Info("log level changed", "logger", c.name, "level", level)
	}
	return nil
}
