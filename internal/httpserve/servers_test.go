package httpserve

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

var errTestClosed = errors.New("test: closed")

// syncBuffer is a log destination safe for the servers' goroutines.
type syncBuffer struct {
	mu    sync.Mutex // guards b
	b     bytes.Buffer
	wrote chan struct{} // given one per write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.wrote <- struct{}{} }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func hello() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
}

func get(t *testing.T, cl *http.Client, url string) string {
	t.Helper()
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServersServeAndShutdown(t *testing.T) {
	s := NewServers("test", errTestClosed, slog.New(slog.DiscardHandler))
	addr, err := s.ListenAndServe("127.0.0.1:0", nil, hello())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln, hello()); err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, a := range []string{addr, ln.Addr().String()} {
		if got := get(t, cl, "http://"+a+"/"); got != "hello" {
			t.Fatalf("GET %s: %q", a, got)
		}
	}
	s.Shutdown(5 * time.Second)
	if _, err := cl.Get("http://" + addr + "/"); err == nil {
		t.Fatal("a request after Shutdown was answered")
	}
	// After Shutdown, Serve closes the listener it is given and fails.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln2, hello()); err != errTestClosed {
		t.Fatalf("Serve after Shutdown: %v, want the closed error", err)
	}
	if _, err := ln2.Accept(); err == nil {
		t.Fatal("the listener given to Serve after Shutdown is open")
	}
	s.Shutdown(5 * time.Second) // a second call does nothing more
}

func TestServersListenTLS(t *testing.T) {
	ts := httptest.NewTLSServer(hello()) // for its certificate and a client trusting it
	defer ts.Close()
	s := NewServers("test", errTestClosed, slog.New(slog.DiscardHandler))
	defer s.Shutdown(5 * time.Second)
	addr, err := s.ListenAndServe("127.0.0.1:0", &tls.Config{Certificates: ts.TLS.Certificates}, hello())
	if err != nil {
		t.Fatal(err)
	}
	cl := ts.Client()
	cl.Transport.(*http.Transport).DisableKeepAlives = true
	if got := get(t, cl, "https://"+addr+"/"); got != "hello" {
		t.Fatalf("GET over TLS: %q", got)
	}
}

func TestServersListenError(t *testing.T) {
	s := NewServers("test server", errTestClosed, slog.New(slog.DiscardHandler))
	_, err := s.ListenAndServe("256.0.0.1:0", nil, hello())
	if err == nil || !strings.HasPrefix(err.Error(), "test server: listen on 256.0.0.1:0: ") {
		t.Fatalf("listen on a bad address: %v", err)
	}
}

// failingListener fails its first Accept with an error that is not
// http.ErrServerClosed, then stays closed.
type failingListener struct {
	net.Listener
}

func (l failingListener) Accept() (net.Conn, error) {
	return nil, errors.New("accept failed")
}

func TestServersLogsAServerThatStops(t *testing.T) {
	logged := &syncBuffer{wrote: make(chan struct{}, 1)}
	s := NewServers("test", errTestClosed, slog.New(slog.NewTextHandler(logged, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := s.Serve(failingListener{ln}, hello()); err != nil {
		t.Fatal(err)
	}
	<-logged.wrote
	s.Shutdown(5 * time.Second)
	if out := logged.String(); !strings.Contains(out, `msg="test HTTP server stopped" err="accept failed"`) {
		t.Fatalf("log: %q", out)
	}
}

// TestServersShutdownGrace: a request still running when the grace
// ends has its connection closed, and Shutdown returns without it.
func TestServersShutdownGrace(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	handlerDone := make(chan struct{})
	s := NewServers("test", errTestClosed, slog.New(slog.DiscardHandler))
	addr, err := s.ListenAndServe("127.0.0.1:0", nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		close(started)
		<-release
	}))
	if err != nil {
		t.Fatal(err)
	}
	reqErr := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		reqErr <- err
	}()
	<-started
	s.Shutdown(time.Millisecond)
	if err := <-reqErr; err == nil {
		t.Fatal("the request running past the grace was answered")
	}
	close(release)
	<-handlerDone
}
