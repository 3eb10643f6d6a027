// Package httpserve is what Sluice's two HTTP servers, the console
// (internal/console) and the schema registry (internal/schemaregistry),
// share: running an http.Server on each listener and shutting them all
// down (Servers), and HTTP Basic login against the broker's SASL users
// with a cache of successful checks (BasicLogin).
package httpserve

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
)

// Servers runs an http.Server on each listener it is given, with the
// same limits for every one, until Shutdown.
//
// Goroutines: Serve starts one per listener, running its server;
// Shutdown stops the servers and waits for those goroutines.
type Servers struct {
	name   string // names the servers in a log line and a failed listen's error
	closed error  // what Serve returns after Shutdown
	log    *slog.Logger

	mu      sync.Mutex // guards servers and down
	servers []*http.Server
	down    bool

	wg sync.WaitGroup // the servers' goroutines
}

// NewServers returns a Servers that logs to log. name ("console",
// "schema registry") starts the log line of a server that stops on an
// error and the error of a failed listen; closed is what Serve returns
// once Shutdown has begun.
func NewServers(name string, closed error, log *slog.Logger) *Servers {
	return &Servers{name: name, closed: closed, log: log}
}

// Serve serves h on ln until Shutdown. It returns at once; the listener
// is closed by Shutdown, or at once, with the closed error, after it.
func (s *Servers) Serve(ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		ln.Close()
		return s.closed
	}
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(s.name+" HTTP server stopped", "err", err)
		}
	}()
	return nil
}

// ListenAndServe listens on addr (with TLS when tc is not nil) and
// serves h there; it returns the listener's address (for ":0").
func (s *Servers) ListenAndServe(addr string, tc *tls.Config, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s: listen on %s: %w", s.name, addr, err)
	}
	a := ln.Addr().String()
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	return a, s.Serve(ln, h)
}

// Shutdown stops the servers, letting requests in flight finish for up
// to grace before closing their connections, and waits for the servers'
// goroutines. Serve fails after it. A second call does nothing more.
func (s *Servers) Shutdown(grace time.Duration) {
	s.mu.Lock()
	s.down = true
	srvs := s.servers
	s.servers = nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	for _, srv := range srvs {
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}
	cancel()
	s.wg.Wait()
}
