package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/auth"
	"github.com/sluicedb/sluice/internal/cleaner"
	"github.com/sluicedb/sluice/internal/groups"
	"github.com/sluicedb/sluice/internal/meta"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/share"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/txn"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// nodeID is the id of the one broker of a Sluice cluster.
const nodeID int32 = 0

// closeGrace is how long Close lets busy connections finish their
// request before it closes them.
const closeGrace = 10 * time.Second

// Broker is a single-node Kafka-compatible broker over a data directory.
//
// Goroutines: New starts the disk monitor; Start starts the accept
// goroutine and one goroutine per client connection; each partition owns
// an acceptor goroutine started by New (or when the partition is
// created). All are owned by the Broker and stop in Close: it closes the
// listener (ending the accept goroutine), cancels stopCtx (ending the
// disk monitor), wakes idle connections and long-polling fetches, waits
// for every connection goroutine to answer its in-flight request and
// exit, then closes the transaction and group coordinators and every
// partition (acceptors flush and fsync, logs write their checkpoints),
// and last releases the data directory's lock.
//
// Lock order: docs/lockorder.md ("broker").
type Broker struct {
	cfg     cfg
	layout  meta.Layout // the data directory's paths
	fs      vfs.FS
	metrics *metrics
	accM    *acceptor.Metrics
	syncs   chan struct{} // fsync slots shared by every partition's acceptor (acceptor.Config.Syncs)
	// wal is the write-ahead log shared by the partitions (nil when off);
	// walReplay is what the previous run left in it, replayed by load
	// and retired once every partition opened; walOff says the WAL is
	// off and its directory goes once replayed. Set by New, closed by
	// Close.
	wal       *wal.WAL
	walReplay *wal.Replay
	walOff    bool
	walKeep   bool // a partition was failed at Close: keep the WAL (set by closePartitions, under adminMu)

	// adminMu serializes changes to the set of topics and partitions
	// (create, delete, add partitions, producer-id reservation) and is
	// held across their file I/O. Readers of topics take only mu.
	adminMu sync.Mutex
	cluster meta.Cluster // guarded by adminMu
	// dyn is the dynamic broker configuration; stored under adminMu,
	// loaded by anyone (see dynamic).
	dyn atomic.Pointer[dynamicConfig]
	// groupConfs are the GROUP resources' configs (groupconfig.go);
	// stored under adminMu, loaded by anyone.
	groupConfs atomic.Pointer[meta.GroupConfigs]

	mu     sync.RWMutex      // guards topics, byID, conns and lns
	topics map[string]*topic // by name; a topic value's fields never change (see topic)
	byID   map[[16]byte]*topic
	conns  map[*conn]struct{}
	lns    []*listener // after Start, in the configured order

	tls   *tlsState
	creds *auth.Credentials
	acls  *auth.ACLs
	authz authorizer // nil when authorization is off
	fails authFailures

	// tokens is the delegation-token store (api_delegationtoken.go),
	// opened with creds.
	tokens *auth.Tokens
	// quotas holds the client quotas and their accounts, reqBytes the
	// bound on request bytes held (quotas.go); set by New.
	quotas   *quotaState
	reqBytes *byteBudget
	// loggers holds the BROKER_LOGGER levels (loglevels.go); set by New,
	// its levels change atomically.
	loggers *logLevels

	groups *groups.Coordinator // opened by Start; nil before
	// txnc is the transaction coordinator, opened by Start after groups
	// (nil before); atomic because partition acceptors read it.
	txnc atomic.Pointer[txn.Coordinator]
	// sharec is the share-group coordinator (share.go), opened by Start
	// after txnc (nil before), closed by Close.
	sharec atomic.Pointer[share.Coordinator]

	// cleaner compacts the logs of compacted topics; started by New,
	// closed by Close before the partitions.
	cleaner *cleaner.Cleaner

	lock vfs.Unlocker // the data directory's lock, held from New to the end of Close

	// The disk guard (disk.go): the monitor goroutine, started by New and
	// stopped by Close (through stopCtx), stores what it sees in disk
	// and closes monitorDone when it returns.
	disk        atomic.Pointer[diskState]
	monitorDone chan struct{}
	diskMu      sync.Mutex    // guards diskCh
	diskCh      chan struct{} // closed after each disk check

	nextPID atomic.Int64 // next producer id InitProducerID hands out

	// snaps writes the partitions' periodic producer-state snapshots;
	// started by New (its goroutine is the partition package's), stopped
	// by Close before the partitions close.
	snaps *partition.Snapshots

	traffic partition.Traffic // totals over every partition, deleted ones included
	started time.Time         // when New returned, for uptime

	readyMu     sync.Mutex // guards readyChecks
	readyChecks []readyCheck

	connCount atomic.Int64 // open connections, for MaxConnections
	closing   atomic.Bool  // set first by Close
	stopCtx   context.Context
	stop      context.CancelFunc // cancels stopCtx: wakes long polls and blocked handlers
	wg        sync.WaitGroup     // the accept goroutine, connection goroutines and preparers of new partitions (prepareParts)

	// The maker goroutine (makeFiles): the partitions whose files it is
	// to make, whether it runs, and whether Close stopped it.
	// pendBudget bounds the bytes new partitions keep in memory before
	// their files are made (storage.PendingBudget).
	pendBudget  *storage.PendingBudget
	dirSyncs    *storage.DirSyncs // new partitions' first directory syncs, batched
	makeMu      sync.Mutex
	makeQueue   []*partition.Partition
	makeRunning bool
	makeStopped bool
	makeWG      sync.WaitGroup

	startOnce sync.Once
	listening bool // set by Start (under startOnce and mu)
	closeOnce sync.Once
	closeErr  error

	// telemetry holds the client telemetry subscriptions and what
	// clients pushed (telemetry.go).
	telemetry *telemetry
}

// listener is a bound Listener.
type listener struct {
	Listener
	ln   net.Listener
	addr string   // actual listen address
	adv  hostPort // advertised address
	tlsc *tls.Config
}

// hostPort is an advertised address.
type hostPort struct {
	host string
	port int32
}

func splitHostPort(addr string) (string, int32, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return h, int32(port), nil
}

// New opens (creating if needed) the data directory and recovers every
// partition of every topic: each log is opened and checked, its producer
// state rebuilt from its batch headers, and its acceptor started. It
// does not listen; Start does.
func New(opts ...Opt) (*Broker, error) {
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	loggers, lh := newLogLevels(c.logger.Handler())
	c.logger = slog.New(lh)
	lock, err := storage.LockDir(c.fs, c.dataDir, meta.Layout{Root: c.dataDir}.Lock())
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b := &Broker{
		cfg:         c,
		pendBudget:  storage.NewPendingBudget(pendingBudgetFor(physicalMemory())),
		dirSyncs:    storage.NewDirSyncs(c.fs),
		loggers:     loggers,
		layout:      meta.Layout{Root: c.dataDir},
		fs:          c.fs,
		topics:      map[string]*topic{},
		byID:        map[[16]byte]*topic{},
		conns:       map[*conn]struct{}{},
		lock:        lock,
		monitorDone: make(chan struct{}),
		diskCh:      make(chan struct{}),
	}
	b.metrics = newMetrics(c.registerer)
	b.telemetry = newTelemetry(b)
	b.accM = acceptor.NewMetrics(c.registerer)
	b.syncs = make(chan struct{}, maxConcurrentSyncs)
	b.stopCtx, b.stop = context.WithCancel(context.Background())
	b.snaps = partition.NewSnapshots(c.snapshotInterval)
	if err := b.openQuotas(); err != nil {
		b.stop()
		b.snaps.Close()
		lock.Unlock()
		return nil, err
	}
	if err := b.openSecurity(); err != nil {
		b.stop()
		b.snaps.Close()
		lock.Unlock()
		return nil, err
	}
	if err := b.openWAL(); err != nil {
		b.stop()
		b.snaps.Close()
		lock.Unlock()
		return nil, err
	}
	err = b.load()
	if err == nil {
		err = b.retireWALReplay()
	}
	if err != nil {
		b.stopMaker() // the WAL's replay may have started it
		b.closePartitions()
		b.closeWAL(false)
		b.stop()
		b.snaps.Close()
		lock.Unlock()
		return nil, err
	}
	b.startCleaner()
	b.checkDisk()
	go b.monitorDisk()
	if c.registerer != nil {
		c.registerer.MustRegister(&collector{b: b}, b.telemetry)
		c.registerer.MustRegister(shareCollector{b}) // share_metrics.go
		c.registerer.MustRegister(&quotaCollector{b: b})
	}
	b.started = time.Now()
	return b, nil
}

// Start listens on the configured address, opens the group coordinator
// and serves clients in background goroutines. It may be called once.
func (b *Broker) Start() error {
	err := errors.New("broker: Start called twice")
	b.startOnce.Do(func() {
		err = b.start()
	})
	return err
}

func (b *Broker) start() error {
	if b.closing.Load() {
		return errors.New("broker: closed")
	}
	if b.wal != nil {
		// The first WAL segment is zeroed and synced in the background
		// from now, not by the first produce after the start.
		b.wal.Start()
	}
	var lns []*listener
	closeAll := func() {
		for _, l := range lns {
			l.ln.Close()
		}
	}
	for _, lc := range b.cfg.listeners {
		l, err := b.listen(lc)
		if err != nil {
			closeAll()
			return err
		}
		lns = append(lns, l)
	}
	first := lns[0].adv
	proj, err := b.openOffsetsTopic()
	if err != nil {
		closeAll()
		return fmt.Errorf("broker: open %s: %w", offsetsTopic, err)
	}
	g, err := groups.OpenWatched(groups.Config{
		FS:              b.fs,
		Dir:             b.layout.GroupsDir(),
		NodeID:          nodeID,
		Host:            first.host,
		Port:            first.port,
		Logger:          b.componentLogger("groups"),
		Registerer:      b.cfg.registerer,
		PartitionExists: b.partitionExists,
		Topics:          b.groupTopics,
		Consumer:        b.consumerGroupsConfig(),
		Fsync:           b.cfg.fsync,
		WAL:             b.wal,
		PendingTxnOffset: func(group, topic string, partition int32) bool {
			tc := b.txnc.Load()
			return tc != nil && tc.PendingOffset(group, topic, partition)
		},
	}, proj.watch)
	if err != nil {
		closeAll()
		var ce *storage.CorruptionError
		if errors.As(err, &ce) {
			return fmt.Errorf("broker: open group coordinator: %w; to cut its log at the last valid batch (a copy is kept), "+
				"stop the broker and run: sluice repair --data %s --truncate-after-corruption", err, b.cfg.dataDir)
		}
		return fmt.Errorf("broker: open group coordinator: %w", err)
	}
	// The transaction coordinator recovers after the partitions and the
	// groups are open: finishing a decided transaction writes markers and
	// offsets.
	tc, err := b.openTxn(g)
	if err != nil {
		closeAll()
		g.Close()
		var ce *storage.CorruptionError
		if errors.As(err, &ce) {
			return fmt.Errorf("broker: open transaction coordinator: %w; to cut its log at the last valid batch (a copy is kept), "+
				"stop the broker and run: sluice repair --data %s --truncate-after-corruption", err, b.cfg.dataDir)
		}
		return fmt.Errorf("broker: open transaction coordinator: %w", err)
	}
	sc, err := b.openShare()
	if err != nil {
		closeAll()
		tc.Close()
		g.Close()
		return err
	}
	b.mu.Lock()
	if b.closing.Load() {
		// Close ran while the listeners and coordinator were being
		// opened; it saw neither, so close them here.
		b.mu.Unlock()
		closeAll()
		sc.Close()
		tc.Close()
		g.Close()
		return errors.New("broker: closed")
	}
	b.lns, b.groups = lns, g
	b.txnc.Store(tc)
	b.sharec.Store(sc)
	b.listening = true
	b.wg.Add(len(lns) + 1) // under mu, so that Close's wg.Wait cannot run before it
	b.mu.Unlock()
	proj.replayed()
	go proj.run(b.stopCtx) // the __consumer_offsets copy (internal_topics.go)
	for _, l := range lns {
		b.cfg.logger.Info("sluice broker listening", "listener", l.Protocol, "addr", l.addr, "advertised", net.JoinHostPort(l.adv.host, strconv.Itoa(int(l.adv.port))), "data", b.cfg.dataDir)
		go b.acceptLoop(l)
	}
	return nil
}

// listen binds one listener.
func (b *Broker) listen(lc Listener) (*listener, error) {
	ln, err := net.Listen("tcp", lc.Addr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen %s: %w", lc.Protocol, err)
	}
	adv := lc.Advertise
	if adv == "" {
		adv = ln.Addr().String()
	}
	host, port, err := splitHostPort(adv)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("broker: advertised address %q: %w", adv, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		// A wildcard is not an address a client can dial.
		host = "127.0.0.1"
	}
	l := &listener{Listener: lc, ln: ln, addr: ln.Addr().String(), adv: hostPort{host, port}}
	if lc.tls() {
		l.tlsc = b.tls.serverConfig(lc)
	}
	return l, nil
}

// Addr is the address the broker's first listener listens on (after
// Start), such as "127.0.0.1:41234".
func (b *Broker) Addr() string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(b.lns) == 0 {
		return ""
	}
	return b.lns[0].addr
}

// ListenerAddr is the address the listener with the given security
// protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) listens on after
// Start, or "" if there is none.
func (b *Broker) ListenerAddr(protocol string) string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, l := range b.lns {
		if l.Protocol == protocol {
			return l.addr
		}
	}
	return ""
}

// acceptLoop accepts connections until the listener is closed.
func (b *Broker) acceptLoop(l *listener) {
	defer b.wg.Done()
	ln := l.ln
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if b.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failure (such as EMFILE): back off and retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			b.cfg.logger.Warn("accept failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-b.stopCtx.Done():
				return
			}
			continue
		}
		backoff = 0
		if b.connCount.Add(1) > int64(b.cfg.maxConns) {
			b.connCount.Add(-1)
			b.metrics.connsRejected.Inc()
			b.cfg.logger.Warn("connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max", b.cfg.maxConns)
			nc.Close()
			continue
		}
		c := newConn(b, nc, l)
		b.mu.Lock()
		if b.closing.Load() {
			b.mu.Unlock()
			b.connCount.Add(-1)
			nc.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		b.metrics.conns.Inc()
		go c.serve()
	}
}

// dropConn forgets a finished connection.
func (b *Broker) dropConn(c *conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	b.connCount.Add(-1)
	b.metrics.conns.Dec()
	b.shareConnClosed(c) // share.go
}

// Close shuts the broker down gracefully: it stops accepting, lets every
// connection answer the request it is handling (long-polling fetches
// answer at once with what they have), closes idle connections, then
// closes the group coordinator and every partition, whose acceptors
// write and fsync everything queued and whose logs write their
// clean-shutdown checkpoints. It is idempotent and returns the first
// error met.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		b.mu.Lock()
		lns, g := b.lns, b.groups
		conns := make([]*conn, 0, len(b.conns))
		for c := range b.conns {
			conns = append(conns, c)
		}
		b.mu.Unlock()
		for _, l := range lns {
			l.ln.Close()
		}
		b.stop()
		for _, c := range conns {
			c.interruptIfIdle()
		}
		done := make(chan struct{})
		go func() { b.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeGrace):
			b.cfg.logger.Warn("closing connections still busy after the grace period")
			b.mu.RLock()
			for c := range b.conns {
				c.nc.Close()
			}
			b.mu.RUnlock()
			<-done
		}
		var errs []error
		if sc := b.sharec.Load(); sc != nil {
			if err := sc.Close(); err != nil {
				errs = append(errs, fmt.Errorf("broker: close share coordinator: %w", err))
			}
		}
		if tc := b.txnc.Load(); tc != nil {
			if err := tc.Close(); err != nil {
				errs = append(errs, fmt.Errorf("broker: close transaction coordinator: %w", err))
			}
		}
		if g != nil {
			if err := g.Close(); err != nil {
				errs = append(errs, fmt.Errorf("broker: close group coordinator: %w", err))
			}
		}
		if err := b.cleaner.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: close log cleaner: %w", err))
		}
		b.snaps.Close()
		// The coordinators' logs write through the WAL too: if one did
		// not fsync at close, the WAL still holds its acknowledged records.
		coordClean := len(errs) == 0
		b.stopMaker()
		perr := b.closePartitions()
		errs = append(errs, perr, b.closeWAL(perr == nil && coordClean && !b.walKeep))
		<-b.monitorDone
		if err := b.lock.Unlock(); err != nil {
			errs = append(errs, fmt.Errorf("broker: release the data directory lock: %w", err))
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// closePartitions closes every partition of every topic cleanly
// (partition.CloseAll).
func (b *Broker) closePartitions() error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	b.mu.Lock()
	ts := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		ts = append(ts, t)
	}
	b.topics = map[string]*topic{}
	b.byID = map[[16]byte]*topic{}
	b.mu.Unlock()
	var ps []*partition.Partition
	for _, t := range ts {
		for _, p := range t.parts {
			if p.Err() != nil {
				// Failed and not healed: its log may hold less than it
				// acknowledged, which the WAL still has.
				b.walKeep = true
			}
			ps = append(ps, p)
		}
	}
	// Together: a bounded number of filesystem syncs for all of them. An
	// error keeps the WAL (see Close).
	return partition.CloseAll(ps)
}

// newUUID returns a random version-4 UUID (a Kafka topic id, never all
// zeros).
func newUUID() [16]byte {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic("broker: crypto/rand failed: " + err.Error())
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func uuidString(u [16]byte) string { return hex.EncodeToString(u[:]) }

// clusterID is the id kept in cluster.json.
func (b *Broker) clusterID() string {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	return b.cluster.ClusterID
}
