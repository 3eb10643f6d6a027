// Package console is Sluice's HTTP server: the web console (embedded
// assets, no network needed), Prometheus metrics, health and readiness
// probes, and the JSON API under /api/v1/ that the console pages use.
//
// The console reads the broker through its read-only monitoring view
// (broker.Info, Topics, Groups, ShareGroups, Stats) and, for what Kafka
// clients see (records, group members, share groups), through a Kafka
// client speaking the Kafka protocol to the broker, so it shows what a
// client would; a share partition's records in flight by state, which no
// Kafka API answers, come from broker.ShareGroups (sharegroups.go).
// Mutations
// (create and delete topics, reset group offsets) are off unless
// Config.Admin is set and go through the same Kafka requests a client
// sends (CreateTopics, DeleteTopics, OffsetCommit).
//
// Security: the Kafka client connects in process (broker.InternalConn,
// over net.Pipe) as the broker itself, so it needs no TLS or SASL and
// works whatever the listeners; ACLs do not apply to it. The console
// applies them instead: when the broker has a SASL listener every page
// and API route asks for HTTP Basic authentication against the broker's
// SASL users, and with authorization on each route shows and does only
// what the logged-in user's ACLs allow, as Kafka would decide the same
// request (access.go has the table). /healthz, /readyz and /metrics stay
// open for orchestrators and Prometheus.
//
// Routes:
//
//	/                  console (single page; pages under #/...)
//	/static/...        embedded assets
//	/metrics           Prometheus exposition
//	/healthz           200 while the process serves HTTP
//	/readyz            200 when the broker is ready, else 503 with the reason
//	/api/v1/...        JSON API (see api.go)
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/httpserve"
	"github.com/sluicedb/sluice/internal/schemaregistry"
)

//go:embed web
var webFS embed.FS

// Defaults.
const (
	DefaultAddr        = "127.0.0.1:9644"
	DefaultSampleEvery = 2 * time.Second
	DefaultHistory     = 1800 // points per series: one hour at DefaultSampleEvery
)

// Authenticator decides who makes a request. It returns the user name,
// or ok=false after writing a response itself (401, or a redirect to a
// login page). With SASL on and no Authenticator given, the console
// uses HTTP Basic authentication against the broker's SASL users
// (access.go). The user is available to handlers through User(ctx), and
// the broker's ACLs are applied to it.
type Authenticator func(w http.ResponseWriter, r *http.Request) (user string, ok bool)

// Config configures a Server.
type Config struct {
	// Broker is the started broker to show. Required.
	Broker *broker.Broker
	// Gatherer serves /metrics: the registry given to the broker's
	// broker.Registerer option. Nil: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Admin enables mutations (create/delete topic, reset offsets).
	Admin bool
	// Logger receives request errors. Nil: discard.
	Logger *slog.Logger
	// SampleEvery is the resolution of the charts' history. Default 2s.
	SampleEvery time.Duration
	// History is the points kept per series. Default 1800 (an hour at 2 s).
	History int
	// Auth, when set, guards every route but /healthz, /readyz and
	// /metrics. Nil: HTTP Basic authentication against the broker's SASL
	// users when the broker has a SASL listener, else no login
	// (access.go).
	Auth Authenticator
	// ClientOpts are added to the in-process Kafka client's options.
	ClientOpts []kgo.Opt
	// Schemas, when set, adds the schema registry's pages (subjects,
	// versions, schemas, compatibility levels; its REST API under
	// /api/v1/registry/) and decodes records in its wire format in the
	// message browser (schemas.go).
	Schemas *schemaregistry.Registry
}

// Server is the console's HTTP handler and the sampler that fills the
// charts' history.
//
// Goroutines: New starts the sampler goroutine; Serve runs an HTTP
// server goroutine per listener (httpserve.Servers). Close stops both
// (servers by Shutdown, then the sampler by closing stop) and waits for
// them, then closes the in-process Kafka client. Close is idempotent.
type Server struct {
	cfg     Config
	b       *broker.Broker
	log     *slog.Logger
	hist    *history
	mux     *http.ServeMux
	handler http.Handler // mux with the headers every answer gets
	adm     *kadm.Client
	kcl     *kgo.Client   // shared by admin requests and group descriptions
	clOpt   []kgo.Opt     // options for per-request consumers (the message browser)
	sem     chan struct{} // bounds concurrent message-browser reads

	servers *httpserve.Servers // those Serve starts; shut down by Close

	stop      chan struct{}  // closed by Close: ends the sampler and failed-login delays
	wg        sync.WaitGroup // the sampler
	closeOnce sync.Once
}

// New creates the server and starts sampling the broker's counters.
func New(cfg Config) (*Server, error) {
	if cfg.Broker == nil {
		return nil, errors.New("console: Config.Broker is nil")
	}
	if cfg.Broker.Addr() == "" {
		return nil, errors.New("console: the broker has not started")
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = DefaultSampleEvery
	}
	if cfg.History <= 1 {
		cfg.History = DefaultHistory
	}
	// The console's Kafka client talks to the broker in process, as the
	// broker itself (broker.InternalConn): it works whatever the
	// listeners' security and advertised addresses, and the console
	// enforces its users' ACLs itself (access.go).
	b := cfg.Broker
	clOpt := append([]kgo.Opt{
		kgo.SeedBrokers("sluice-internal:0"), // not dialed: the Dialer connects in process
		kgo.ClientID("sluice-console"),
		kgo.Dialer(func(context.Context, string, string) (net.Conn, error) {
			return b.InternalConn()
		}),
	}, cfg.ClientOpts...)
	kcl, err := kgo.NewClient(clOpt...)
	if err != nil {
		return nil, fmt.Errorf("console: kafka client: %w", err)
	}
	s := &Server{
		cfg:   cfg,
		b:     cfg.Broker,
		log:   cfg.Logger,
		hist:  newHistory(cfg.History, cfg.SampleEvery),
		kcl:   kcl,
		adm:   kadm.NewClient(kcl),
		clOpt: clOpt,
		sem:   make(chan struct{}, 4),
		stop:  make(chan struct{}),
	}
	s.servers = httpserve.NewServers("console", errors.New("console: closed"), s.log)
	if s.cfg.Auth == nil && b.SASLEnabled() {
		s.cfg.Auth = basicLogin(httpserve.NewBasicLogin(b, s.log, "console", s.stop))
	}
	s.routes()
	s.wg.Add(1)
	go s.sampleLoop()
	return s, nil
}

// Handler is the server's HTTP handler, for embedding in another server
// or httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves HTTP on ln until Close. It returns at once; the listener
// is closed by Close.
func (s *Server) Serve(ln net.Listener) error { return s.servers.Serve(ln, s.handler) }

// Close stops the HTTP servers (letting requests in flight finish for
// up to 5 s), the sampler and the Kafka client.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.servers.Shutdown(5 * time.Second)
		close(s.stop)
		s.wg.Wait()
		s.kcl.Close()
	})
	return nil
}

// ListenAndServe listens on addr and serves there; it returns the
// listener's address (for ":0").
func (s *Server) ListenAndServe(addr string) (string, error) {
	return s.servers.ListenAndServe(addr, nil, s.handler)
}

type userKey struct{}

// User returns the user an Authenticator let in, or "" without one.
func User(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	// Probes and metrics stay open: orchestrators and Prometheus call them.
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}))

	static, _ := fs.Sub(webFS, "web")
	s.mux.Handle("GET /static/", s.guard(http.StripPrefix("/static/", cacheFor(http.FileServerFS(static)))))
	s.mux.Handle("GET /{$}", s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
		http.ServeFileFS(w, r, static, "index.html")
	})))
	s.apiRoutes()
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY") // no framing: admin buttons cannot be clickjacked
		h.Set("Referrer-Policy", "same-origin")
		s.mux.ServeHTTP(w, r)
	})
}

// readyz answers 200 "ready" or 503 with the reason.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.b.Ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err.Error())
		return
	}
	fmt.Fprintln(w, "ready")
}

// guard applies the Authenticator, if any.
func (s *Server) guard(h http.Handler) http.Handler {
	if s.cfg.Auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := s.cfg.Auth(w, r)
		if !ok {
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}
