package schemaregistry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/httpserve"
)

// Defaults.
const (
	DefaultAddr  = "127.0.0.1:8081"
	DefaultTopic = "_schemas"
)

// Config configures a Registry.
type Config struct {
	// Broker is the started broker that stores the registry's topic
	// and whose users and ACLs apply. Required.
	Broker *broker.Broker
	// Topic is the compacted topic holding the registry's state.
	// Default DefaultTopic (Confluent's kafkastore.topic default).
	Topic string
	// Logger receives the registry's logs. Nil: discard.
	Logger *slog.Logger
	// Registerer receives the registry's metrics. Nil: none.
	Registerer prometheus.Registerer
	// TLS, when set, makes ListenAndServe serve HTTPS.
	TLS *tls.Config
	// ClientOpts are added to the options of the registry's Kafka
	// clients (tests).
	ClientOpts []kgo.Opt
}

// Registry is a schema registry serving Confluent's REST API over the
// state it keeps in the broker's _schemas topic.
//
// Goroutines: each Serve starts one HTTP server goroutine, stopped by
// Close; the Kafka client's goroutines are franz-go's, stopped by Close.
type Registry struct {
	cfg     Config
	b       *broker.Broker
	log     *slog.Logger
	store   *store
	handler http.Handler
	metrics *metrics
	login   *httpserve.BasicLogin // nil without SASL

	// wmu serializes changes: it is held from the checks a change
	// makes against the state, through the write to the topic, to
	// applying the written records. Lock order: wmu before mu.
	wmu   sync.Mutex
	stale bool // guarded by wmu: a write failed; read the topic again before the next

	mu sync.RWMutex // guards st
	st *state

	decoders decodeCache // parsed schemas for Decode

	servers *httpserve.Servers // those Serve starts; shut down by Close

	stop      chan struct{} // closed by Close: failed-login delays end
	closeOnce sync.Once
}

// New opens the registry: it creates the topic if it does not exist and
// replays it. ctx bounds the replay.
func New(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Broker == nil {
		return nil, errors.New("schemaregistry: Config.Broker is nil")
	}
	if cfg.Broker.Addr() == "" {
		return nil, errors.New("schemaregistry: the broker has not started")
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Registry{cfg: cfg, b: cfg.Broker, log: cfg.Logger, st: newState(), stop: make(chan struct{}),
		servers: httpserve.NewServers("schema registry", errors.New("schemaregistry: closed"), cfg.Logger)}
	st, err := openStore(ctx, cfg.Broker, cfg.Topic, cfg.ClientOpts)
	if err != nil {
		return nil, fmt.Errorf("schemaregistry: %w", err)
	}
	r.store = st
	start := time.Now()
	if r.st, err = r.load(ctx); err != nil {
		st.close()
		return nil, fmt.Errorf("schemaregistry: replay %s: %w", cfg.Topic, err)
	}
	r.log.Info("schema registry loaded", "topic", cfg.Topic, "records", r.st.records, "subjects", len(r.st.subjects), "schemas", len(r.st.ids), "took", time.Since(start).Round(time.Millisecond))
	r.metrics = newMetrics(cfg.Registerer, r)
	if cfg.Broker.SASLEnabled() {
		r.login = httpserve.NewBasicLogin(cfg.Broker, r.log, "schema registry", r.stop)
	}
	r.handler = r.routes()
	return r, nil
}

// load reads the topic into a new state.
func (r *Registry) load(ctx context.Context) (*state, error) {
	s := newState()
	err := r.store.replay(ctx, func(k, v []byte) error {
		rec, ok, err := decodeRecord(k, v)
		if err != nil {
			r.log.Warn("schema registry: skipping a record it cannot decode", "topic", r.cfg.Topic, "err", err)
			return nil
		}
		if ok {
			s.apply(rec)
		}
		return nil
	})
	return s, err
}

// resyncLocked replaces the state with one read from the topic again.
// Callers hold wmu.
func (r *Registry) resyncLocked(ctx context.Context) error {
	s, err := r.load(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.st = s
	r.mu.Unlock()
	r.stale = false
	r.log.Info("schema registry: state read again from the topic after a failed write", "records", s.records)
	return nil
}

// Handler is the registry's HTTP handler (for httptest or another server).
func (r *Registry) Handler() http.Handler { return r.handler }

// Serve serves HTTP on ln until Close; it returns at once. The listener
// is closed by Close.
func (r *Registry) Serve(ln net.Listener) error { return r.servers.Serve(ln, r.handler) }

// ListenAndServe listens on addr (with TLS when Config.TLS is set) and
// serves there; it returns the listener's address (for ":0").
func (r *Registry) ListenAndServe(addr string) (string, error) {
	return r.servers.ListenAndServe(addr, r.cfg.TLS, r.handler)
}

// Close stops the HTTP servers (letting requests in flight finish for
// up to 5 s) and the Kafka client. It is idempotent.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.servers.Shutdown(5 * time.Second)
		r.store.close()
		r.metrics.unregister()
	})
	return nil
}
