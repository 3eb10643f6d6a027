package quota

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the rate window (Kafka's quota.window.num and
// quota.window.size.seconds).
const (
	DefaultWindowNum  = 11
	DefaultWindowSize = time.Second
)

// Config configures a Manager.
type Config struct {
	// WindowNum is the number of samples the rate is kept over (Kafka's
	// quota.window.num). Default DefaultWindowNum.
	WindowNum int
	// WindowSize is one sample's span (quota.window.size.seconds).
	// Default DefaultWindowSize.
	WindowSize time.Duration
	// Now is the clock; default time.Now (tests substitute theirs).
	Now func() time.Time
}

func (c *Config) fill() error {
	if c.WindowNum == 0 {
		c.WindowNum = DefaultWindowNum
	}
	if c.WindowSize == 0 {
		c.WindowSize = DefaultWindowSize
	}
	if c.WindowNum < 2 {
		return fmt.Errorf("quota window count %d: want at least 2", c.WindowNum)
	}
	if c.WindowSize < time.Millisecond {
		return fmt.Errorf("quota window size %v: want at least 1ms", c.WindowSize)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Manager applies a Set: it counts each request's usage against the
// limit that Resolve finds and returns the throttle time. It is safe
// for concurrent use and starts no goroutine.
type Manager struct {
	cfg    Config
	window time.Duration // WindowNum × WindowSize: the burst a bucket holds

	set    atomic.Pointer[Set]
	active [4]atomic.Bool // per key (keyIndex): some entity has a quota on it
	anySet atomic.Bool    // some entity has a quota

	mu        sync.Mutex // guards buckets and lastSweep
	buckets   map[bucketID]*bucket
	lastSweep time.Time
}

// keyIndex is k's index in Manager.active (-1: not a key). A switch:
// it runs on every request.
func keyIndex(k Key) int {
	switch k {
	case ProducerByteRate:
		return 0
	case ConsumerByteRate:
		return 1
	case RequestPercentage:
		return 2
	case ControllerMutationRate:
		return 3
	}
	return -1
}

type bucketID struct {
	key Key
	who Sharer
}

// bucket is one sharer's account for one key.
type bucket struct {
	limit     float64   // per second
	tokens    float64   // may go below zero; at most limit × window
	last      time.Time // when tokens were last refilled
	used      time.Time // last Record
	rate      Rate      // the measured usage, for metrics
	throttled float64   // seconds of throttle handed out, in total
}

// NewManager returns a Manager with no quotas.
func NewManager(cfg Config) (*Manager, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, window: time.Duration(cfg.WindowNum) * cfg.WindowSize, buckets: map[bucketID]*bucket{}}
	m.set.Store(&Set{})
	return m, nil
}

// Window is the rate window: WindowNum × WindowSize.
func (m *Manager) Window() time.Duration { return m.window }

// Quotas returns the Set in force.
func (m *Manager) Quotas() Set { return *m.set.Load() }

// SetQuotas replaces the Set in force; the next Record uses it. Accounts
// keep their usage across the change.
func (m *Manager) SetQuotas(s Set) {
	m.set.Store(&s)
	for _, k := range Keys {
		on := false
		for _, vals := range s.m {
			if _, ok := vals[k]; ok {
				on = true
				break
			}
		}
		m.active[keyIndex(k)].Store(on)
	}
	m.anySet.Store(len(s.m) > 0)
}

// Active reports whether any entity has a quota on k.
func (m *Manager) Active(k Key) bool {
	i := keyIndex(k)
	return i >= 0 && m.active[i].Load()
}

// Any reports whether any quota is set.
func (m *Manager) Any() bool { return m.anySet.Load() }

// Record counts amount (bytes; percent-seconds of thread time for
// RequestPercentage; partitions for ControllerMutationRate) against the
// limit on k for user and clientID, and returns how long the client must
// now be held back (zero when within its limit or none applies).
func (m *Manager) Record(k Key, user, clientID string, amount float64) time.Duration {
	b, now := m.lockAccount(k, user, clientID)
	if b == nil {
		return 0
	}
	defer m.mu.Unlock()
	b.tokens -= amount
	b.rate.record(now, amount, m.cfg)
	return m.throttleLocked(b)
}

// Check reports, without counting anything, how long the client must
// wait before its next use of k is allowed (KIP-599's strict check for
// controller mutations: a request is refused while the account is below
// zero).
func (m *Manager) Check(k Key, user, clientID string) time.Duration {
	b, _ := m.lockAccount(k, user, clientID)
	if b == nil {
		return 0
	}
	defer m.mu.Unlock()
	if b.tokens >= 0 {
		return 0
	}
	return m.throttleLocked(b)
}

// lockAccount returns the account a request of user with clientID is
// counted in for k, refilled up to now, with m.mu held; or nil (m.mu
// not held) when no quota applies.
func (m *Manager) lockAccount(k Key, user, clientID string) (*bucket, time.Time) {
	if !m.Active(k) {
		return nil, time.Time{}
	}
	limit, who, ok := m.set.Load().Resolve(k, user, clientID)
	if !ok {
		return nil, time.Time{}
	}
	now := m.cfg.Now()
	m.mu.Lock()
	return m.accountLocked(k, who, limit, now), now
}

// accountLocked returns who's account for k, refilled up to now. m.mu
// must be held.
func (m *Manager) accountLocked(k Key, who Sharer, limit float64, now time.Time) *bucket {
	m.sweepLocked(now)
	id := bucketID{key: k, who: who}
	b := m.buckets[id]
	capacity := limit * m.window.Seconds()
	if b == nil {
		b = &bucket{limit: limit, tokens: capacity, last: now}
		m.buckets[id] = b
	}
	b.limit = limit
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens += dt * limit
		b.last = now
	}
	b.tokens = min(b.tokens, capacity)
	b.used = now
	return b
}

// throttleLocked is the time b needs to refill to zero, at most the
// window; it is added to b's total. m.mu must be held.
func (m *Manager) throttleLocked(b *bucket) time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	secs := min(-b.tokens/b.limit, m.window.Seconds())
	b.throttled += secs
	return time.Duration(secs * float64(time.Second))
}

// sweepLocked drops, once per window, the accounts unused for two
// windows: a client id that went away costs nothing after that (its
// bucket had refilled, so nothing it owed is forgotten). m.mu must be
// held.
func (m *Manager) sweepLocked(now time.Time) {
	if now.Sub(m.lastSweep) < m.window {
		return
	}
	m.lastSweep = now
	for id, b := range m.buckets {
		if now.Sub(b.used) > 2*m.window {
			delete(m.buckets, id)
		}
	}
}

// Stat is one account's state, for metrics.
type Stat struct {
	Key      Key
	Who      Sharer
	Limit    float64 // per second
	Rate     float64 // measured over the window, per second
	Throttle float64 // seconds of throttle handed out, in total
}

// Stats returns every account's state, sorted by key and sharer.
func (m *Manager) Stats() []Stat {
	now := m.cfg.Now()
	m.mu.Lock()
	out := make([]Stat, 0, len(m.buckets))
	for id, b := range m.buckets {
		out = append(out, Stat{Key: id.key, Who: id.who, Limit: b.limit, Rate: b.rate.measure(now, m.cfg), Throttle: b.throttled})
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Who.User != b.Who.User {
			return a.Who.User < b.Who.User
		}
		return a.Who.Client < b.Who.Client
	})
	return out
}

// Rate is Kafka's sampled rate: WindowNum samples of WindowSize each;
// the rate is their sum over the time they span (at least WindowNum-1
// windows, so that a fresh account does not read as a spike).
type Rate struct {
	samples []sample
}

type sample struct {
	start time.Time
	value float64
}

func (r *Rate) record(now time.Time, v float64, c Config) {
	if n := len(r.samples); n > 0 && now.Sub(r.samples[n-1].start) < c.WindowSize {
		r.samples[n-1].value += v
		return
	}
	r.purge(now, c)
	if len(r.samples) == c.WindowNum {
		r.samples = append(r.samples[:0], r.samples[1:]...)
	}
	r.samples = append(r.samples, sample{start: now, value: v})
}

// purge drops the samples that ended more than the window ago.
func (r *Rate) purge(now time.Time, c Config) {
	span := time.Duration(c.WindowNum) * c.WindowSize
	i := 0
	for i < len(r.samples) && now.Sub(r.samples[i].start) >= span {
		i++
	}
	r.samples = append(r.samples[:0], r.samples[i:]...)
}

func (r *Rate) measure(now time.Time, c Config) float64 {
	r.purge(now, c)
	if len(r.samples) == 0 {
		return 0
	}
	var total float64
	for _, s := range r.samples {
		total += s.value
	}
	elapsed := now.Sub(r.samples[0].start)
	if minSpan := time.Duration(c.WindowNum-1) * c.WindowSize; elapsed < minSpan {
		elapsed = minSpan
	}
	return total / elapsed.Seconds()
}
