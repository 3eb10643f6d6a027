package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePasswords knows one password per user and counts the checks and
// failed logins.
type fakePasswords struct {
	mu     sync.Mutex // guards the fields below
	users  map[string]string
	checks int
	failed []string // hosts of failed logins
	delay  time.Duration

	failures chan struct{} // given one per failed login, when not nil
}

func (p *fakePasswords) CheckPassword(user, password string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks++
	pw, ok := p.users[user]
	return ok && pw == password
}

func (p *fakePasswords) LoginFailed(host string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = append(p.failed, host)
	if p.failures != nil {
		p.failures <- struct{}{}
	}
	return p.delay
}

func (p *fakePasswords) counts() (checks, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checks, len(p.failed)
}

func request(user, password string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.7:5555"
	if user != "" || password != "" {
		r.SetBasicAuth(user, password)
	}
	return r
}

// clock is a time source the test moves.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestLogin(pw *fakePasswords, stop <-chan struct{}) (*BasicLogin, *clock) {
	l := NewBasicLogin(pw, slog.New(slog.DiscardHandler), "test", stop)
	c := &clock{t: time.Unix(1_000_000, 0)}
	l.now = c.now
	return l, c
}

func TestBasicLoginChecks(t *testing.T) {
	pw := &fakePasswords{users: map[string]string{"alice": "secret"}}
	l, _ := newTestLogin(pw, nil)

	if _, err := l.Check(request("", "")); !errors.Is(err, ErrNoLogin) {
		t.Fatalf("no credentials: %v, want ErrNoLogin", err)
	}
	if _, err := l.Check(request("alice", "wrong")); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong password: %v, want ErrWrongPassword", err)
	}
	// An empty user name never reaches the password check.
	if _, err := l.Check(request("", "secret")); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("empty user: %v, want ErrWrongPassword", err)
	}
	user, err := l.Check(request("alice", "secret"))
	if err != nil || user != "alice" {
		t.Fatalf("right password: %q, %v", user, err)
	}
	checks, failed := pw.counts()
	if checks != 2 || failed != 2 {
		t.Fatalf("%d password checks and %d failed logins, want 2 and 2", checks, failed)
	}
	if pw.failed[0] != "192.0.2.7" {
		t.Fatalf("failed login counted for host %q, want the client's address without the port", pw.failed[0])
	}
}

// TestBasicLoginCache: a successful check is remembered for
// loginCacheFor, for that user and password only.
func TestBasicLoginCache(t *testing.T) {
	pw := &fakePasswords{users: map[string]string{"alice": "secret"}}
	l, c := newTestLogin(pw, nil)
	for range 3 {
		if _, err := l.Check(request("alice", "secret")); err != nil {
			t.Fatal(err)
		}
	}
	if checks, _ := pw.counts(); checks != 1 {
		t.Fatalf("%d password checks for three logins within the cache time, want 1", checks)
	}
	if _, err := l.Check(request("alice", "other")); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("another password while cached: %v, want ErrWrongPassword", err)
	}
	c.add(loginCacheFor)
	if _, err := l.Check(request("alice", "secret")); err != nil {
		t.Fatal(err)
	}
	if checks, _ := pw.counts(); checks != 3 {
		t.Fatalf("%d password checks, want 3: the expired entry checks the password again", checks)
	}
	// A password changed at the broker stops working once the entry expires.
	pw.mu.Lock()
	pw.users["alice"] = "new"
	pw.mu.Unlock()
	if _, err := l.Check(request("alice", "secret")); err != nil {
		t.Fatalf("old password within the cache time: %v", err)
	}
	c.add(loginCacheFor)
	if _, err := l.Check(request("alice", "secret")); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("old password after the cache time: %v, want ErrWrongPassword", err)
	}
}

// TestBasicLoginCacheBound: a full cache drops its expired entries, and
// when none has expired, all of them.
func TestBasicLoginCacheBound(t *testing.T) {
	pw := &fakePasswords{users: map[string]string{}}
	var users []string
	for i := range loginCacheSize + 1 {
		users = append(users, fmt.Sprintf("user%d", i))
		pw.users[users[i]] = "pw"
	}
	l, c := newTestLogin(pw, nil)
	login := func(user string) {
		t.Helper()
		if _, err := l.Check(request(user, "pw")); err != nil {
			t.Fatal(err)
		}
	}
	// Half the cache expires before the other half is filled in.
	for _, u := range users[:loginCacheSize/2] {
		login(u)
	}
	c.add(loginCacheFor / 2)
	for _, u := range users[loginCacheSize/2 : loginCacheSize] {
		login(u)
	}
	c.add(loginCacheFor / 2) // the first half has expired
	login(users[loginCacheSize])
	l.mu.Lock()
	n := len(l.ok)
	l.mu.Unlock()
	if n != loginCacheSize-loginCacheSize/2+1 {
		t.Fatalf("%d cached logins after the cache filled with half expired, want %d", n, loginCacheSize-loginCacheSize/2+1)
	}
	// Fill it again with live entries: the next login clears it.
	for _, u := range users[:loginCacheSize/2-1] {
		login(u)
	}
	l.mu.Lock()
	n = len(l.ok)
	l.mu.Unlock()
	if n != loginCacheSize {
		t.Fatalf("%d cached logins, want a full cache of %d", n, loginCacheSize)
	}
	checks, _ := pw.counts()
	login(users[loginCacheSize/2-1])
	l.mu.Lock()
	n = len(l.ok)
	l.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d cached logins after a login to a full cache of live entries, want 1", n)
	}
	// What was cleared is checked against the passwords again.
	login(users[0])
	if now, _ := pw.counts(); now != checks+2 {
		t.Fatalf("%d password checks after the clear, want %d", now, checks+2)
	}
}

// TestBasicLoginDelayEnds: the delay of a failed login ends when the
// request's context ends or stop closes.
func TestBasicLoginDelayEnds(t *testing.T) {
	pw := &fakePasswords{users: map[string]string{}, delay: time.Hour, failures: make(chan struct{}, 2)}
	stop := make(chan struct{})
	l, _ := newTestLogin(pw, stop)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Check(request("bob", "x").WithContext(ctx))
		done <- err
	}()
	<-pw.failures // the delay starts
	cancel()
	if err := <-done; !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("after the request's context ended: %v, want ErrWrongPassword", err)
	}

	go func() {
		_, err := l.Check(request("bob", "x"))
		done <- err
	}()
	<-pw.failures
	close(stop)
	if err := <-done; !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("after stop: %v, want ErrWrongPassword", err)
	}
}

func TestClientHost(t *testing.T) {
	for addr, want := range map[string]string{"192.0.2.1:80": "192.0.2.1", "[2001:db8::1]:443": "2001:db8::1", "pipe": "pipe"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if got := ClientHost(r); got != want {
			t.Errorf("ClientHost(%q) = %q, want %q", addr, got, want)
		}
	}
}
