package share

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/kvlog"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Settings are the broker-wide share-group settings, named after
// Kafka's; zero values take Kafka's defaults.
type Settings struct {
	// RecordLockDuration: group.share.record.lock.duration.ms (30 s).
	RecordLockDuration time.Duration
	// DeliveryCountLimit: group.share.delivery.count.limit (5).
	DeliveryCountLimit int
	// PartitionMaxRecordLocks: group.share.partition.max.record.locks (2000).
	PartitionMaxRecordLocks int
	// HeartbeatInterval: group.share.heartbeat.interval.ms (5 s).
	HeartbeatInterval time.Duration
	// SessionTimeout: group.share.session.timeout.ms (45 s).
	SessionTimeout time.Duration
	// MaxSize: group.share.max.size (200).
	MaxSize int
	// AutoOffsetReset: the default share.auto.offset.reset, "latest"
	// (the default), "earliest", or "by_duration:" and an ISO-8601
	// duration (PnDTnHnMnS): the first record at most that long ago.
	AutoOffsetReset string
	// IsolationLevel: the default share.isolation.level,
	// "read_uncommitted" (the default) or "read_committed".
	IsolationLevel string
}

// WithDefaults fills the zero values and checks the rest.
func (s Settings) WithDefaults() (Settings, error) {
	if s.RecordLockDuration == 0 {
		s.RecordLockDuration = 30 * time.Second
	}
	if s.DeliveryCountLimit == 0 {
		s.DeliveryCountLimit = 5
	}
	if s.PartitionMaxRecordLocks == 0 {
		s.PartitionMaxRecordLocks = 2000
	}
	if s.HeartbeatInterval == 0 {
		s.HeartbeatInterval = 5 * time.Second
	}
	if s.SessionTimeout == 0 {
		s.SessionTimeout = 45 * time.Second
	}
	if s.MaxSize == 0 {
		s.MaxSize = 200
	}
	if s.AutoOffsetReset == "" {
		s.AutoOffsetReset = "latest"
	}
	if s.IsolationLevel == "" {
		s.IsolationLevel = "read_uncommitted"
	}
	switch {
	case s.RecordLockDuration < time.Millisecond || s.RecordLockDuration > time.Hour:
		return s, fmt.Errorf("share: group.share.record.lock.duration.ms %v is outside 1ms-1h", s.RecordLockDuration)
	case s.DeliveryCountLimit < 2 || s.DeliveryCountLimit > 10:
		return s, fmt.Errorf("share: group.share.delivery.count.limit %d is outside 2-10 (Kafka's bounds)", s.DeliveryCountLimit)
	case s.PartitionMaxRecordLocks < 100 || s.PartitionMaxRecordLocks > 10000:
		return s, fmt.Errorf("share: group.share.partition.max.record.locks %d is outside 100-10000 (Kafka's bounds)", s.PartitionMaxRecordLocks)
	case s.HeartbeatInterval <= 0 || s.SessionTimeout <= s.HeartbeatInterval:
		return s, fmt.Errorf("share: group.share.heartbeat.interval.ms %v must be positive and shorter than group.share.session.timeout.ms %v", s.HeartbeatInterval, s.SessionTimeout)
	case s.MaxSize < 1:
		return s, fmt.Errorf("share: group.share.max.size %d must be at least 1", s.MaxSize)
	case s.AutoOffsetReset != "latest" && s.AutoOffsetReset != "earliest" && !strings.HasPrefix(s.AutoOffsetReset, byDuration):
		return s, fmt.Errorf("share: share.auto.offset.reset %q is not latest, earliest or by_duration:PnDTnHnMnS", s.AutoOffsetReset)
	case s.IsolationLevel != "read_uncommitted" && s.IsolationLevel != "read_committed":
		return s, fmt.Errorf("share: share.isolation.level %q is not read_uncommitted or read_committed", s.IsolationLevel)
	}
	if d, ok := strings.CutPrefix(s.AutoOffsetReset, byDuration); ok {
		if _, err := parseISODuration(d); err != nil {
			return s, fmt.Errorf("share: share.auto.offset.reset %q: %w", s.AutoOffsetReset, err)
		}
	}
	return s, nil
}

const byDuration = "by_duration:"

// parseISODuration parses the ISO-8601 durations Kafka's
// share.auto.offset.reset takes: PnD, then T with nH, nM and n(.n)S, in
// that order, each optional but one, none negative.
func parseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("duration %q is not an ISO-8601 duration such as PT1H or P1DT12H", s)
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, bad
	}
	var d time.Duration
	days, timePart, hasT := strings.Cut(rest, "T")
	if days != "" {
		n, ok := strings.CutSuffix(days, "D")
		v, err := strconv.ParseUint(n, 10, 32)
		if !ok || err != nil {
			return 0, bad
		}
		d += time.Duration(v) * 24 * time.Hour
	}
	if hasT {
		if timePart == "" {
			return 0, bad
		}
		for _, u := range []struct {
			suffix string
			unit   time.Duration
		}{{"H", time.Hour}, {"M", time.Minute}, {"S", time.Second}} {
			i := strings.Index(timePart, u.suffix)
			if i < 0 {
				continue
			}
			v, err := strconv.ParseFloat(timePart[:i], 64)
			if err != nil || v < 0 || timePart[:i] == "" || strings.ContainsAny(timePart[:i], "eE+-") {
				return 0, bad
			}
			d += time.Duration(v * float64(u.unit))
			timePart = timePart[i+1:]
		}
		if timePart != "" {
			return 0, bad
		}
	}
	return d, nil
}

func (s Settings) limits() Limits {
	return Limits{LockMs: s.RecordLockDuration.Milliseconds(), DeliveryLimit: s.DeliveryCountLimit, MaxLocks: s.PartitionMaxRecordLocks}
}

// Log is one topic partition's log as share groups read it.
type Log interface {
	StartOffset() int64
	HighWatermark() int64
	// LastStableOffset is where read_committed reads stop.
	LastStableOffset() int64
	// Read returns whole batches from the one holding offset on, at most
	// maxBytes of them (at least one), up to the high watermark, or,
	// committed, the last stable offset.
	Read(offset int64, committed bool, maxBytes int) ([]byte, error)
	// AbortedBatch reports whether a transactional batch was aborted.
	AbortedBatch(h *batch.Header) bool
	// OffsetForTime is the first offset whose record's timestamp is at
	// or after ms, or -1 when there is none.
	OffsetForTime(ms int64) (int64, error)
}

// TopicInfo is a topic's id and partition count.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// Logs is the broker's view of its topics.
type Logs interface {
	// Topics lists every topic by name.
	Topics() map[string]TopicInfo
	// Log returns a partition's log and its topic's name, or ok false.
	Log(tp TP) (l Log, topic string, ok bool)
	// Watch returns a channel that receives once a high watermark of
	// one of tps advances, and a function that stops the watch.
	Watch(tps []TP) (<-chan struct{}, func())
}

// Config sets up a Coordinator.
type Config struct {
	FS       vfs.FS
	Dir      string
	Logs     Logs
	Settings Settings
	Logger   *slog.Logger
	Now      func() time.Time
	// CompactMinRecords: compact the state log past this many records
	// (and twice the live ones); default kvlog's.
	CompactMinRecords int
	// Tick is how often locks and member sessions are checked for
	// expiry; default a twentieth of the lock duration, 10 ms to 500 ms.
	Tick time.Duration
	// GroupSettings, when not nil, gives a group's own settings: s (the
	// broker's) with the group's configs applied. It is asked on every
	// use, so that a change applies to the group at once; it must be
	// quick and take no lock held around Coordinator calls.
	GroupSettings func(group string, s Settings) Settings
}

// Coordinator serves share groups: members and their assignments,
// share sessions, and the share partitions' state, kept in a kvlog.Log
// under Config.Dir (see doc.go). Goroutines: Open starts the expiry loop
// (run), stopped and waited for by Close.
type Coordinator struct {
	cfg  Config
	set  Settings
	log  *kvlog.Log
	warn func(string, ...any)
	stop chan struct{}
	done chan struct{}
	once sync.Once

	// mu guards the fields below and every group's members, epoch and
	// partition map (not the partitions' state: sharePartition.mu). See
	// docs/lockorder.md.
	mu       sync.Mutex
	groups   map[string]*group
	sessions map[sessionKey]*session
	closed   bool

	notifyMu sync.Mutex    // guards notify
	notify   chan struct{} // closed and replaced when records become available
}

type group struct {
	id      string
	deleted bool // set by Delete: no share partition is added any more
	epoch   int32
	members map[string]*member
	parts   map[TP]*sharePartition
	target  map[string][]TP // member id → assigned partitions, as of epoch
}

type member struct {
	id, clientID, host string
	rack               *string
	epoch              int32
	topics             []string
	lastSeen           time.Time
}

// sharePartition is one group's share partition. writeMu orders its
// state log writes: a change takes writeMu, then mu to change st and
// take its delta, releases mu, queues the delta, releases writeMu and
// waits for it to be durable without a lock.
type sharePartition struct {
	key     []byte
	writeMu sync.Mutex
	deleted bool       // guarded by writeMu: its group was deleted, nothing more is written
	mu      sync.Mutex // guards st
	st      *spState
}

type sessionKey struct{ group, member string }

// groupSettings are the settings in effect for group id.
func (c *Coordinator) groupSettings(id string) Settings {
	if c.cfg.GroupSettings == nil {
		return c.set
	}
	return c.cfg.GroupSettings(id, c.set)
}

// groupLimits are the limits in effect for group id.
func (c *Coordinator) groupLimits(id string) Limits { return c.groupSettings(id).limits() }

type session struct {
	conn  any   // the connection that opened it (ConnClosed)
	epoch int32 // the epoch the next request must carry
	parts map[TP]bool
	order []TP // parts in the order they were added
}

// Open opens the state log in cfg.Dir, replays it and starts serving.
func Open(cfg Config) (*Coordinator, error) {
	set, err := cfg.Settings.WithDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tick <= 0 {
		cfg.Tick = min(max(set.RecordLockDuration/20, 10*time.Millisecond), 500*time.Millisecond)
	}
	c := &Coordinator{
		cfg: cfg, set: set, warn: cfg.Logger.Warn,
		stop: make(chan struct{}), done: make(chan struct{}),
		groups: map[string]*group{}, sessions: map[sessionKey]*session{},
		notify: make(chan struct{}),
	}
	l, err := kvlog.Open(kvlog.Config{FS: cfg.FS, Dir: cfg.Dir, Fsync: acceptor.FsyncAlways,
		CompactMinRecords: cfg.CompactMinRecords, Now: cfg.Now, Logger: cfg.Logger.With("log", "share")})
	if err != nil {
		return nil, fmt.Errorf("share: %w", err)
	}
	if err := l.Replay(func(_ int64, r kvlog.Record) error { return c.replay(r) }); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("share: replay state log: %w", err)
	}
	for _, g := range c.groups {
		g.epoch++ // members do not survive a restart: they rejoin at a new epoch
		lim := c.groupLimits(g.id)
		for _, sp := range g.parts {
			sp.st.finishLoad(lim)
			sp.st.takeDelta()
		}
	}
	if err := l.Start(c.snapshot); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("share: %w", err)
	}
	c.log = l
	go c.run()
	return c, nil
}

func (c *Coordinator) replay(r kvlog.Record) error {
	kind, gid, tp, err := decodeKey(r.Key)
	if err != nil {
		return err
	}
	g := c.groups[gid]
	if kind == 'g' {
		if r.Value == nil {
			delete(c.groups, gid)
			return nil
		}
		epoch, err := decodeGroupValue(r.Value)
		if err != nil {
			return err
		}
		if g == nil {
			g = newGroup(gid)
			c.groups[gid] = g
		}
		g.epoch = max(g.epoch, epoch)
		return nil
	}
	if g == nil && r.Value == nil {
		return nil // a deleted group's partition
	}
	if g == nil { // its group record was written concurrently, after this one
		g = newGroup(gid)
		c.groups[gid] = g
	}
	sp := g.parts[tp]
	if r.Value == nil {
		delete(g.parts, tp)
		return nil
	}
	var st *spState
	if sp != nil {
		st = sp.st
	}
	st, err = apply(st, r.Value)
	if err != nil {
		return err
	}
	if sp == nil {
		g.parts[tp] = &sharePartition{key: r.Key, st: st}
	}
	return nil
}

func newGroup(id string) *group {
	return &group{id: id, members: map[string]*member{}, parts: map[TP]*sharePartition{}, target: map[string][]TP{}}
}

// snapshot is the live state: every group and share partition, whole.
// The state log calls it to compact itself.
func (c *Coordinator) snapshot() []kvlog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []kvlog.Record
	for _, id := range sortedIDs(c.groups) {
		g := c.groups[id]
		out = append(out, kvlog.Record{Key: groupKey(id), Value: groupValue(g.epoch)})
		for _, sp := range g.parts {
			sp.mu.Lock()
			out = append(out, kvlog.Record{Key: sp.key, Value: sp.st.full()})
			sp.mu.Unlock()
		}
	}
	return out
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Close stops the expiry loop and closes the state log. Idempotent.
func (c *Coordinator) Close() error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		err = c.log.Close()
	})
	return err
}

// errClosed is returned once the coordinator is closed.
var errClosed = errors.New("share: coordinator closed")

// change applies fn to sp's state and makes what it changed durable;
// wait returns once it is (nil when nothing durable changed).
func (c *Coordinator) change(sp *sharePartition, fn func(st *spState)) (wait func() error, err error) {
	sp.writeMu.Lock()
	defer sp.writeMu.Unlock()
	sp.mu.Lock()
	fn(sp.st)
	d := sp.st.takeDelta()
	sp.mu.Unlock()
	if d == nil || sp.deleted {
		return func() error { return nil }, nil
	}
	w, err := c.log.Enqueue([]kvlog.Record{{Key: sp.key, Value: d}})
	if err != nil {
		return nil, fmt.Errorf("share: write state log: %w", err)
	}
	return w, nil
}

// changed returns a channel closed the next time records become
// available (a release, an expired lock, a member leaving).
func (c *Coordinator) changed() <-chan struct{} {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	return c.notify
}

func (c *Coordinator) broadcast() {
	c.notifyMu.Lock()
	close(c.notify)
	c.notify = make(chan struct{})
	c.notifyMu.Unlock()
}

// run expires locks and member sessions every tick until Close.
func (c *Coordinator) run() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.expire()
		}
	}
}

// expire releases expired locks and removes members whose session
// timed out (releasing their records).
func (c *Coordinator) expire() {
	now := c.cfg.Now()
	nowMs := now.UnixMilli()
	type gone struct {
		g *group
		m string
	}
	timedOut := func(g *group, m *member) bool { return now.Sub(m.lastSeen) > c.groupSettings(g.id).SessionTimeout }
	var left []gone
	c.mu.Lock()
	for _, g := range c.groups {
		for id, m := range g.members {
			if timedOut(g, m) {
				left = append(left, gone{g, id})
			}
		}
	}
	c.mu.Unlock()
	var topics map[string]TopicInfo
	if len(left) > 0 {
		topics = c.cfg.Logs.Topics() // outside c.mu: it takes the broker's locks
	}
	type groupPart struct {
		group string
		sp    *sharePartition
	}
	var parts []groupPart
	c.mu.Lock()
	kept := left[:0]
	for _, l := range left {
		if m := l.g.members[l.m]; m != nil && timedOut(l.g, m) {
			c.removeMemberLocked(l.g, l.m, topics)
			kept = append(kept, l)
		}
	}
	left = kept
	for _, g := range c.groups {
		for _, sp := range g.parts {
			parts = append(parts, groupPart{g.id, sp})
		}
	}
	c.mu.Unlock()
	released := false
	for _, l := range left {
		c.cfg.Logger.Info("share group member session timed out", "group", l.g.id, "member", l.m)
		if c.releaseMember(l.g, l.m) {
			released = true
		}
	}
	for _, p := range parts {
		sp := p.sp
		sp.mu.Lock()
		d := sp.st.nextDeadline()
		sp.mu.Unlock()
		if d == 0 || d > nowMs {
			continue
		}
		var changed bool
		lim := c.groupLimits(p.group)
		wait, err := c.change(sp, func(st *spState) { changed = st.expire(nowMs, "", lim) })
		if err == nil {
			err = wait()
		}
		if err != nil {
			c.warn("share: recording expired acquisition locks failed", "err", err)
		}
		released = released || changed
	}
	if released {
		c.broadcast()
	}
}

// releaseMember releases every record member holds in g's partitions.
func (c *Coordinator) releaseMember(g *group, member string) bool {
	c.mu.Lock()
	parts := make([]*sharePartition, 0, len(g.parts))
	for _, sp := range g.parts {
		parts = append(parts, sp)
	}
	c.mu.Unlock()
	released := false
	nowMs := c.cfg.Now().UnixMilli()
	lim := c.groupLimits(g.id)
	for _, sp := range parts {
		var changed bool
		wait, err := c.change(sp, func(st *spState) { changed = st.expire(nowMs, member, lim) })
		if err == nil {
			err = wait()
		}
		if err != nil {
			c.warn("share: recording released records failed", "group", g.id, "err", err)
		}
		released = released || changed
	}
	return released
}

// partition returns g's share partition tp, creating it (durably, its
// start offset set by the group's share.auto.offset.reset as it is
// then) on first use: as in Kafka, a change of share.auto.offset.reset
// applies to the share partitions initialized after it.
func (c *Coordinator) partition(g *group, tp TP, l Log) (*sharePartition, error) {
	c.mu.Lock()
	sp := g.parts[tp]
	if sp != nil {
		c.mu.Unlock()
		return sp, nil
	}
	if g.deleted {
		c.mu.Unlock()
		return nil, fmt.Errorf("share: share group %s was deleted", g.id)
	}
	start := l.HighWatermark()
	switch reset := c.groupSettings(g.id).AutoOffsetReset; {
	case reset == "earliest":
		start = l.StartOffset()
	case strings.HasPrefix(reset, byDuration):
		d, _ := parseISODuration(strings.TrimPrefix(reset, byDuration)) // checked by WithDefaults
		if off, err := l.OffsetForTime(c.cfg.Now().Add(-d).UnixMilli()); err == nil && off >= 0 {
			start = off
		}
	}
	sp = &sharePartition{key: partKey(g.id, tp), st: newState(start)}
	sp.writeMu.Lock() // before the partition is visible: its first write is the initial state
	g.parts[tp] = sp
	c.mu.Unlock()
	w, err := c.log.Enqueue([]kvlog.Record{{Key: sp.key, Value: sp.st.full()}})
	sp.writeMu.Unlock()
	if err == nil {
		err = w()
	}
	if err != nil {
		return nil, fmt.Errorf("share: record share partition: %w", err)
	}
	return sp, nil
}

// ensureGroup returns group id, creating it durably.
func (c *Coordinator) ensureGroup(id string) (*group, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClosed
	}
	g := c.groups[id]
	if g != nil {
		c.mu.Unlock()
		return g, nil
	}
	g = newGroup(id)
	c.groups[id] = g
	c.mu.Unlock()
	if err := c.log.Append([]kvlog.Record{{Key: groupKey(id), Value: groupValue(0)}}, nil); err != nil {
		return nil, fmt.Errorf("share: record group: %w", err)
	}
	return g, nil
}

// Exists reports whether id is a share group.
func (c *Coordinator) Exists(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[id] != nil
}

// validMemberID reports whether a client-chosen member id is usable:
// non-empty and at most 36 characters, as Kafka checks.
func validMemberID(id string) bool { return id != "" && len(id) <= 36 && strings.TrimSpace(id) != "" }
