package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultName is the default mirror name: the target transactional id and
// the target group that holds the copy position.
const DefaultName = "sluice-mirror"

// Config configures Run. From, To are required; everything else has a
// default, named on the field.
type Config struct {
	From []string // source seed brokers
	To   []string // target seed brokers

	// Topics selects source topics by a regular expression matched
	// against the whole name. Nil selects every topic; names starting
	// with "__" (internal topics) are never mirrored.
	Topics *regexp.Regexp
	// Groups selects source consumer groups whose offsets are
	// translated, matched against the whole name. Nil selects every
	// group except the mirror's own.
	Groups *regexp.Regexp

	// Once stops at the source end offsets read at start (the cutover
	// mode). Without it, Run tails until ctx is done.
	Once bool

	// ReplicationFactor of the topics Run creates; 0 or -1 leaves it to
	// the target's default.
	ReplicationFactor int16

	// Name is the target transactional id and the target group holding
	// the copy position; default DefaultName. Two mirrors into one target
	// need different names.
	Name string

	// Interval between progress reports and group-offset translations;
	// default 5s.
	Interval time.Duration
	// Progress, if set, is called with a snapshot every Interval and once
	// at the end (Stats.Final), from Run's goroutine.
	Progress func(Stats)

	// Timeout bounds each admin request and the first connection to each
	// cluster; default 15s.
	Timeout time.Duration

	// MaxBatch is the most records copied in one transaction (or, without
	// transactions, between two position commits); default 10000.
	MaxBatch int

	// Logger receives warnings (skipped configs, the fallback mode);
	// default slog.Default().
	Logger *slog.Logger
	// Registerer, if set, receives the mirror's metrics.
	Registerer prometheus.Registerer

	// SourceOpts and TargetOpts are extra franz-go options (TLS, SASL).
	SourceOpts, TargetOpts []kgo.Opt
}

func (c *Config) setDefaults() error {
	if len(c.From) == 0 || len(c.To) == 0 {
		return errors.New("mirror: both a source (--from) and a target (--to) are required")
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Interval <= 0 {
		c.Interval = 5 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Second
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 10000
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.ReplicationFactor < -1 {
		return fmt.Errorf("mirror: replication factor %d: want -1 (the target's default) or a positive number", c.ReplicationFactor)
	}
	// Match whole names: "orders" must not select "orders-dlq".
	if c.Topics != nil {
		c.Topics = regexp.MustCompile(`^(?:` + c.Topics.String() + `)$`)
	}
	if c.Groups != nil {
		c.Groups = regexp.MustCompile(`^(?:` + c.Groups.String() + `)$`)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Mode is how records reach the target.
type Mode string

const (
	// Transactional: records and copy position commit in one transaction.
	Transactional Mode = "transactional"
	// IdempotentCheckpoint: idempotent writes, then a position commit;
	// a restart skips what was written past the last position.
	IdempotentCheckpoint Mode = "idempotent+checkpoint"
)

// TopicStats is the progress of one topic.
type TopicStats struct {
	Records int64 // records copied by this run
	Bytes   int64 // key+value+header bytes copied by this run
	Lag     int64 // source records not yet copied (at the last check)
}

// GroupStats is what happened to one source group at the last translation.
type GroupStats struct {
	// Offsets written to the target (topic, partition, target offset).
	Offsets map[string]map[int32]int64
	// Skipped says why the group was not written, if it was not.
	Skipped string
}

// Stats is a progress snapshot.
type Stats struct {
	Mode          Mode
	Elapsed       time.Duration
	Records       int64   // records copied by this run
	Bytes         int64   // bytes copied by this run
	RecordsPerSec float64 // over the last interval
	BytesPerSec   float64 // over the last interval
	Transactions  int64   // commits (transactions, or position commits)
	Topics        map[string]TopicStats
	Groups        map[string]GroupStats
	Final         bool
}

// Report is what Run did.
type Report struct {
	Stats
	Created        []string            // target topics created
	SkippedConfigs map[string][]string // per topic, source configs not copied
	Resumed        bool                // a copy position was found on the target
}

// String renders the final report for people.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mirror finished (%s): %d records, %.1f MB in %s, %d commits\n",
		r.Mode, r.Records, float64(r.Bytes)/1e6, r.Elapsed.Round(time.Millisecond), r.Transactions)
	if len(r.Created) > 0 {
		fmt.Fprintf(&b, "created topics: %s\n", strings.Join(r.Created, ", "))
	}
	for _, t := range sortedKeys(r.SkippedConfigs) {
		fmt.Fprintf(&b, "topic %s: configs not copied (broker-specific): %s\n", t, strings.Join(r.SkippedConfigs[t], ", "))
	}
	for _, t := range sortedKeys(r.Topics) {
		s := r.Topics[t]
		fmt.Fprintf(&b, "topic %s: %d records, lag %d\n", t, s.Records, s.Lag)
	}
	for _, g := range sortedKeys(r.Groups) {
		s := r.Groups[g]
		if s.Skipped != "" {
			fmt.Fprintf(&b, "group %s: not written: %s\n", g, s.Skipped)
			continue
		}
		n := 0
		for _, ps := range s.Offsets {
			n += len(ps)
		}
		fmt.Fprintf(&b, "group %s: %d partition offsets translated\n", g, n)
	}
	return b.String()
}

// ProgressLine renders one progress line: records/s and lag per topic.
func (s Stats) ProgressLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mirror: %d records (%.0f records/s, %.2f MB/s), lag", s.Records, s.RecordsPerSec, s.BytesPerSec/1e6)
	for _, t := range sortedKeys(s.Topics) {
		fmt.Fprintf(&b, " %s=%d", t, s.Topics[t].Lag)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Run mirrors until ctx is done, or, with Config.Once, until the source
// end offsets read at start are copied. A ctx ending is a clean stop, not
// an error: the report says how far the copy got.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m := &mirror{cfg: cfg, log: cfg.Logger, start: time.Now()}
	defer m.close()
	if err := m.connect(ctx); err != nil {
		return nil, err
	}
	plan, err := m.planTopics(ctx)
	if err != nil {
		return nil, err
	}
	m.report.SkippedConfigs = plan.skipped
	m.initPartitions(plan)
	if err := m.detectMode(ctx); err != nil {
		return nil, err
	}
	if err := m.applyPlan(ctx, plan); err != nil {
		return nil, err
	}
	m.metrics = newMetrics(cfg.Registerer)
	defer m.metrics.unregister()
	if err := m.openWriter(ctx); err != nil {
		return nil, err
	}
	if err := m.loadPositions(ctx, plan); err != nil {
		return nil, err
	}
	err = m.copyLoop(ctx)
	stopped := ctx.Err() != nil && err == ctx.Err() // a clean stop; a failed final commit is an error
	if err == nil || stopped {
		// A final tick with a fresh context: translate groups and
		// measure lag after the last commit.
		fctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
		ferr := m.tick(fctx, true)
		cancel()
		if err == nil {
			err = ferr
		} else {
			err = nil // stopped by the caller
		}
	}
	m.report.Stats = m.snapshot(true)
	return &m.report, err
}
