package groups

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client identifies the connection a request came on: its client.id from
// the request header and its remote host. JoinGroup records them for
// DescribeGroups.
type Client struct {
	ID   string
	Host string
}

// Coordinator is the consumer-group coordinator for every group of a
// broker, with committed offsets persisted in an internal log.
//
// It starts no goroutine of its own apart from the internal log's
// acceptor and short-lived writers tracked by wg: session, rebalance and
// retention timers run their callbacks through after, which counts them
// in wg and turns them into no-ops once Close has begun. Close stops every
// timer, releases every blocked JoinGroup and SyncGroup, waits for wg and
// then closes the internal log.
type Coordinator struct {
	cfg     Config
	st      store
	metrics *metrics

	closing atomic.Bool // set first thing in Close; handlers then refuse work

	mu     sync.RWMutex // guards groups
	groups map[string]*group

	lifeMu  sync.Mutex // guards closed, janitor, and wg.Add against Close's wg.Wait
	closed  bool
	janitor Timer
	wg      sync.WaitGroup // timer callbacks and background writes in flight

	closeOnce sync.Once
	closeErr  error
}

// Open replays the internal log and starts the coordinator.
func Open(cfg Config) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := newMetrics(cfg.Registerer)
	st, err := openLogStore(cfg, m.compactions.Inc)
	if err != nil {
		return nil, err
	}
	c, err := open(cfg, st, m)
	if err != nil {
		_ = st.close()
		return nil, err
	}
	return c, nil
}

// open builds a coordinator over st: it replays st, then starts it.
func open(cfg Config, st store, m *metrics) (*Coordinator, error) {
	c := &Coordinator{cfg: cfg, st: st, groups: map[string]*group{}, metrics: m}
	if err := st.replay(c.applyRecord); err != nil {
		return nil, fmt.Errorf("groups: replay internal log: %w", err)
	}
	c.finishReplay()
	if err := st.start(c.snapshot); err != nil {
		return nil, fmt.Errorf("groups: start internal log: %w", err)
	}
	c.lifeMu.Lock()
	c.janitor = c.cfg.AfterFunc(c.cfg.RetentionCheckInterval, c.janitorTick)
	c.lifeMu.Unlock()
	c.metrics.groups.Set(float64(c.numGroups()))
	return c, nil
}

// Close stops timers and goroutines and closes the internal log. Blocked
// JoinGroup and SyncGroup calls return COORDINATOR_NOT_AVAILABLE.
// Idempotent.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		c.lifeMu.Lock()
		c.closed = true
		if c.janitor != nil {
			c.janitor.Stop()
		}
		c.lifeMu.Unlock()
		for _, g := range c.groupList() {
			g.mu.Lock()
			c.shutdownGroupLocked(g)
			g.mu.Unlock()
		}
		c.wg.Wait()
		c.closeErr = c.st.close()
	})
	return c.closeErr
}

// shutdownGroupLocked stops the group's timers and releases its waiters.
func (c *Coordinator) shutdownGroupLocked(g *group) {
	if g.rebalance != nil {
		g.rebalance.Stop()
		g.rebalance = nil
	}
	for id, t := range g.pending {
		t.Stop()
		delete(g.pending, id)
	}
	for _, m := range g.members {
		if m.timer != nil {
			m.timer.Stop()
			m.timer = nil
		}
		c.failWaitersLocked(m, errCoordinatorNotAvailable)
	}
	for id, ct := range g.ctimers {
		ct.stop()
		delete(g.ctimers, id)
	}
}

// failWaitersLocked answers a member's blocked JoinGroup and SyncGroup
// with code.
func (c *Coordinator) failWaitersLocked(m *member, code int16) {
	if m.joinWait != nil {
		w := m.joinWait
		m.joinWait = nil
		w(joinError(m.joinVersion, code, m.id))
	}
	if m.syncWait != nil {
		w := m.syncWait
		m.syncWait = nil
		w(syncError(m.syncVersion, code))
	}
}

// stopped is a Timer that never runs.
type stopped struct{}

func (stopped) Stop() bool { return false }

// after schedules f after d. f runs counted in wg, and not at all once
// Close has begun. The caller may hold any lock but lifeMu.
func (c *Coordinator) after(d time.Duration, f func()) Timer {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closed {
		return stopped{}
	}
	return c.cfg.AfterFunc(d, func() {
		if !c.enter() {
			return
		}
		defer c.wg.Done()
		f()
	})
}

// enter counts a callback or background write in wg; it reports false
// once Close has begun.
func (c *Coordinator) enter() bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// goBackground runs f on a goroutine counted in wg: Close waits for it.
func (c *Coordinator) goBackground(f func()) {
	if !c.enter() {
		return
	}
	go func() {
		defer c.wg.Done()
		f()
	}()
}

func (c *Coordinator) now() time.Time { return c.cfg.Now() }

func (c *Coordinator) lookup(id string) *group {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.groups[id]
}

func (c *Coordinator) getOrCreate(id string) *group {
	if g := c.lookup(id); g != nil {
		return g
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if g == nil {
		g = newGroup(id, c.now())
		c.groups[id] = g
		c.metrics.groups.Set(float64(len(c.groups)))
	}
	return g
}

// remove drops g from the map if it is still the group under its id.
func (c *Coordinator) remove(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	c.metrics.groups.Set(float64(len(c.groups)))
}

func (c *Coordinator) numGroups() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.groups)
}

// groupList returns every group, sorted by id.
func (c *Coordinator) groupList() []*group {
	c.mu.RLock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.RUnlock()
	sort.Slice(gs, func(i, j int) bool { return gs[i].id < gs[j].id })
	return gs
}

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return clientID + "-" + hex.EncodeToString(b[:])
}

// applyRecord applies one internal-log record during replay.
func (c *Coordinator) applyRecord(off int64, r kv) error {
	if isConsumerKey(r.Key) {
		d, err := decodeConsumerRecord(r)
		if err != nil {
			return fmt.Errorf("record at offset %d: %w", off, err)
		}
		c.applyConsumerRecord(d)
		return nil
	}
	d, err := decodeRecord(r)
	if err != nil {
		return fmt.Errorf("record at offset %d: %w", off, err)
	}
	switch {
	case d.offset != nil:
		g := c.getOrCreate(d.offset.Group)
		k := tp{d.offset.Topic, d.offset.Partition}
		if d.offsetValue == nil {
			delete(g.offsets, k)
			return nil
		}
		v := d.offsetValue
		epoch := v.LeaderEpoch
		if v.Version < 3 {
			epoch = -1
		}
		g.offsets[k] = &committed{offset: v.Offset, epoch: epoch, metadata: v.Metadata,
			commitMs: v.CommitTimestamp, expireMs: v.ExpireTimestamp, logOffset: off}
	case d.group != nil:
		g := c.getOrCreate(d.group.Group)
		if d.groupValue == nil {
			g.meta = nil
		} else {
			g.meta = append([]byte(nil), r.Value...)
		}
		g.metaOffset = off
	}
	return nil
}

// finishReplay turns the replayed records into live groups: a group whose
// metadata names members comes back Stable in its generation, its members'
// sessions starting now; one without comes back Empty; one with neither
// metadata nor offsets is dropped.
func (c *Coordinator) finishReplay() {
	now := c.now()
	var drop []*group
	defer func() {
		for _, g := range drop {
			c.remove(g)
		}
	}()
	for _, g := range c.groupList() {
		g.mu.Lock()
		if g.cg != nil && !g.cgRecorded && len(g.cg.members) == 0 {
			g.cg = nil
		}
		if g.cg != nil {
			c.finishConsumerReplayLocked(g, now)
			g.mu.Unlock()
			continue
		}
		if g.meta == nil {
			if len(g.offsets) == 0 {
				drop = append(drop, g)
				g.mu.Unlock()
				continue
			}
			var last int64
			for _, o := range g.offsets {
				last = max(last, o.commitMs)
			}
			g.setStateLocked(stateEmpty, time.UnixMilli(last))
			g.mu.Unlock()
			continue
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(g.meta); err != nil { // checked by applyRecord
			panic(fmt.Sprintf("groups: group %q metadata no longer decodes: %v", g.id, err))
		}
		g.protocolType = v.ProtocolType
		g.generation = v.Generation
		g.setStateLocked(stateEmpty, time.UnixMilli(v.CurrentStateTimestamp))
		if len(v.Members) > 0 && v.Protocol != nil {
			g.protocol = *v.Protocol
			if v.Leader != nil {
				g.leader = *v.Leader
			}
			for _, vm := range v.Members {
				g.joinSeq++
				m := &member{
					id: vm.MemberID, clientID: vm.ClientID, clientHost: vm.ClientHost,
					session:    time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
					rebalance:  time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
					protocols:  []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
					assignment: vm.Assignment,
					joinSeq:    g.joinSeq,
					generation: g.generation,
				}
				if vm.InstanceID != nil && *vm.InstanceID != "" {
					m.instanceID = *vm.InstanceID
					g.static[m.instanceID] = m.id
				}
				g.members[m.id] = m
				c.heartbeatLocked(g, m)
			}
			if g.members[g.leader] == nil {
				g.leader = ""
			}
			g.setStateLocked(stateStable, now)
		}
		g.mu.Unlock()
	}
}

// snapshot returns the live records: what a compacted internal log holds.
func (c *Coordinator) snapshot() []kv {
	var recs []kv
	for _, g := range c.groupList() {
		g.mu.Lock()
		if g.meta != nil {
			recs = append(recs, kv{Key: groupKey(g.id), Value: g.meta})
		}
		if g.cg != nil && g.cgRecorded {
			recs = g.cg.snapshot(g.id, recs)
		}
		keys := make([]tp, 0, len(g.offsets))
		for k := range g.offsets {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].topic != keys[j].topic {
				return keys[i].topic < keys[j].topic
			}
			return keys[i].partition < keys[j].partition
		})
		for _, k := range keys {
			recs = append(recs, kv{Key: offsetKey(g.id, k.topic, k.partition), Value: g.offsets[k].value()})
		}
		g.mu.Unlock()
	}
	return recs
}

// persistMetadata writes the group's metadata as it stands now, in the
// background (used when a group empties or a static member is replaced;
// the rebalance itself persists synchronously in SyncGroup).
func (c *Coordinator) persistMetadata(g *group) {
	c.goBackground(func() {
		g.persistMu.Lock()
		defer g.persistMu.Unlock()
		g.mu.Lock()
		if g.state == stateDead {
			g.mu.Unlock()
			return
		}
		value := g.metadataLocked(c.now(), nil)
		g.mu.Unlock()
		err := c.st.append([]kv{{Key: groupKey(g.id), Value: value}}, func(base int64) {
			g.mu.Lock()
			g.meta, g.metaOffset = value, base
			g.mu.Unlock()
		})
		if err != nil {
			c.cfg.Logger.Warn("groups: persisting group metadata failed", "group", g.id, "err", err)
		}
	})
}

// janitorTick removes expired offsets and empty groups without offsets,
// then schedules the next tick.
func (c *Coordinator) janitorTick() {
	if !c.enter() {
		return
	}
	defer c.wg.Done()
	c.expire()
	c.lifeMu.Lock()
	if !c.closed {
		c.janitor = c.cfg.AfterFunc(c.cfg.RetentionCheckInterval, c.janitorTick)
	}
	c.lifeMu.Unlock()
}

// expire applies offsets retention. A group that has members keeps its
// offsets. An empty group that was a managed group (it has a protocol
// type) loses all its offsets once it has been empty for
// OffsetsRetention; offsets committed outside group management (a group
// that never had members) expire each OffsetsRetention after its commit,
// or at the expiry an OffsetCommit v2-v4 asked for. An empty group left
// without offsets is deleted.
func (c *Coordinator) expire() {
	now := c.now()
	nowMs := now.UnixMilli()
	ret := c.cfg.OffsetsRetention
	for _, g := range c.groupList() {
		g.persistMu.Lock()
		g.mu.Lock()
		if g.state != stateEmpty {
			g.mu.Unlock()
			g.persistMu.Unlock()
			continue
		}
		var recs []kv
		var gone []tp
		for k, o := range g.offsets {
			var dead bool
			switch {
			case o.expireMs > 0:
				dead = o.expireMs <= nowMs
			case g.protocolType != "":
				dead = !now.Before(g.stateSince.Add(ret))
			default:
				dead = o.commitMs+ret.Milliseconds() <= nowMs
			}
			if dead {
				gone = append(gone, k)
				recs = append(recs, kv{Key: offsetKey(g.id, k.topic, k.partition)})
			}
		}
		drop := len(gone) == len(g.offsets) && len(g.pending) == 0
		if drop {
			g.setStateLocked(stateDead, now)
			recs = append(recs, g.tombstonesLocked()...)
		}
		g.mu.Unlock()
		var err error
		if len(recs) > 0 {
			err = c.st.append(recs, func(int64) {
				g.mu.Lock()
				for _, k := range gone {
					delete(g.offsets, k)
				}
				if drop {
					g.meta = nil
					g.cg, g.cgRecorded = nil, false
				}
				g.mu.Unlock()
			})
		}
		switch {
		case err != nil:
			c.cfg.Logger.Warn("groups: expiring offsets failed", "group", g.id, "err", err)
			if drop {
				g.mu.Lock()
				g.setStateLocked(stateEmpty, now)
				g.mu.Unlock()
			}
		case drop:
			c.remove(g)
			c.metrics.expired.Add(float64(len(gone)))
		default:
			c.metrics.expired.Add(float64(len(gone)))
		}
		g.persistMu.Unlock()
	}
}

// Kafka error codes the coordinator returns.
var (
	errNone                    = int16(0)
	errOffsetMetadataTooLarge  = kerr.OffsetMetadataTooLarge.Code
	errCoordinatorNotAvailable = kerr.CoordinatorNotAvailable.Code
	errUnknownTopicOrPartition = kerr.UnknownTopicOrPartition.Code
	errInvalidGroupID          = kerr.InvalidGroupID.Code
	errIllegalGeneration       = kerr.IllegalGeneration.Code
	errInconsistentGroupProto  = kerr.InconsistentGroupProtocol.Code
	errUnknownMemberID         = kerr.UnknownMemberID.Code
	errInvalidSessionTimeout   = kerr.InvalidSessionTimeout.Code
	errRebalanceInProgress     = kerr.RebalanceInProgress.Code
	errInvalidRequest          = kerr.InvalidRequest.Code
	errNonEmptyGroup           = kerr.NonEmptyGroup.Code
	errGroupIDNotFound         = kerr.GroupIDNotFound.Code
	errMemberIDRequired        = kerr.MemberIDRequired.Code
	errFencedInstanceID        = kerr.FencedInstanceID.Code
	errUnstableOffsetCommit    = kerr.UnstableOffsetCommit.Code
	errGroupSubscribedToTopic  = kerr.GroupSubscribedToTopic.Code
)

// errStoreClosed is returned by a store's append after close.
var errStoreClosed = errors.New("groups: internal log closed")
