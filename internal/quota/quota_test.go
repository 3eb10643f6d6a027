package quota

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func ent(user, client string) Entity {
	var e Entity
	switch user {
	case "":
	case "<default>":
		e.HasUser, e.UserDefault = true, true
	default:
		e.HasUser, e.User = true, user
	}
	switch client {
	case "":
	case "<default>":
		e.HasClient, e.ClientDefault = true, true
	default:
		e.HasClient, e.Client = true, client
	}
	return e
}

func mustWith(t *testing.T, s Set, e Entity, k Key, v float64) Set {
	t.Helper()
	n, err := s.With(e, []Op{{Key: k, Value: v}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPrecedence sets all eight levels and removes them from the most
// specific down: each step must resolve to the next level in Kafka's
// order, with the sharer that level implies.
func TestPrecedence(t *testing.T) {
	levels := []struct {
		e   Entity
		who Sharer
	}{
		{ent("alice", "app"), Sharer{"alice", "app"}},
		{ent("alice", "<default>"), Sharer{"alice", "app"}},
		{ent("alice", ""), Sharer{User: "alice"}},
		{ent("<default>", "app"), Sharer{"alice", "app"}},
		{ent("<default>", "<default>"), Sharer{"alice", "app"}},
		{ent("<default>", ""), Sharer{User: "alice"}},
		{ent("", "app"), Sharer{Client: "app"}},
		{ent("", "<default>"), Sharer{Client: "app"}},
	}
	var s Set
	for i, l := range levels {
		s = mustWith(t, s, l.e, ProducerByteRate, float64(1000+i))
	}
	// Another key set only at the lowest level resolves there
	// throughout: keys are resolved on their own.
	s = mustWith(t, s, ent("", "<default>"), ConsumerByteRate, 7)
	for i, l := range levels {
		v, who, ok := s.Resolve(ProducerByteRate, "alice", "app")
		if !ok || v != float64(1000+i) || who != l.who {
			t.Fatalf("level %d (%s): got %v %+v %v, want %v %+v", i+1, l.e, v, who, ok, 1000+i, l.who)
		}
		if v, _, ok := s.Resolve(ConsumerByteRate, "alice", "app"); !ok || v != 7 {
			t.Fatalf("level %d: consumer_byte_rate %v %v, want 7", i+1, v, ok)
		}
		var err error
		if s, err = s.With(l.e, []Op{{Key: ProducerByteRate, Remove: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok := s.Resolve(ProducerByteRate, "alice", "app"); ok {
		t.Fatal("a quota resolved after every level was removed")
	}
}

// TestResolveOthers: a named level applies to that name only.
func TestResolveOthers(t *testing.T) {
	var s Set
	s = mustWith(t, s, ent("alice", ""), ProducerByteRate, 10)
	s = mustWith(t, s, ent("", "app"), ProducerByteRate, 20)
	s = mustWith(t, s, ent("<default>", ""), RequestPercentage, 50)
	tests := []struct {
		user, client string
		key          Key
		want         float64
		ok           bool
	}{
		{"alice", "other", ProducerByteRate, 10, true},
		{"bob", "app", ProducerByteRate, 20, true},
		{"bob", "other", ProducerByteRate, 0, false},
		{"bob", "other", RequestPercentage, 50, true},
		{"ANONYMOUS", "", RequestPercentage, 50, true},
	}
	for _, tt := range tests {
		v, _, ok := s.Resolve(tt.key, tt.user, tt.client)
		if v != tt.want || ok != tt.ok {
			t.Errorf("%s/%s %s: %v %v, want %v %v", tt.user, tt.client, tt.key, v, ok, tt.want, tt.ok)
		}
	}
}

func TestValidate(t *testing.T) {
	name := "x"
	bad := [][]Component{
		nil,
		{{Type: "ip", Name: &name}},
		{{Type: "group", Name: &name}},
		{{Type: TypeUser, Name: &name}, {Type: TypeUser}},
	}
	for _, cs := range bad {
		if _, err := ParseEntity(cs); err == nil {
			t.Errorf("ParseEntity(%v) accepted", cs)
		}
	}
	badVals := []struct {
		k Key
		v float64
	}{
		{ProducerByteRate, 0}, {ProducerByteRate, -1}, {ProducerByteRate, 1.5},
		{RequestPercentage, math.NaN()}, {"producer_rate", 10},
	}
	for _, bv := range badVals {
		if err := ValidateValue(bv.k, bv.v); err == nil {
			t.Errorf("ValidateValue(%s, %v) accepted", bv.k, bv.v)
		}
		if _, err := (Set{}).With(ent("a", ""), []Op{{Key: bv.k, Value: bv.v}}); err == nil {
			t.Errorf("With(%s, %v) accepted", bv.k, bv.v)
		}
	}
	if err := ValidateValue(RequestPercentage, 12.5); err != nil {
		t.Errorf("request_percentage 12.5: %v", err)
	}
}

func TestMatch(t *testing.T) {
	var s Set
	for _, e := range []Entity{ent("alice", ""), ent("alice", "app"), ent("<default>", ""), ent("", "app"), ent("", "<default>")} {
		s = mustWith(t, s, e, ProducerByteRate, 1)
	}
	tests := []struct {
		fs     []Filter
		strict bool
		want   string
	}{
		{[]Filter{{Type: TypeUser, Match: MatchExact, Name: "alice"}}, false, "user=alice | user=alice, client-id=app"},
		{[]Filter{{Type: TypeUser, Match: MatchExact, Name: "alice"}}, true, "user=alice"},
		{[]Filter{{Type: TypeUser, Match: MatchDefault}}, false, "user=<default>"},
		{[]Filter{{Type: TypeUser, Match: MatchAny}}, true, "user=<default> | user=alice"},
		{[]Filter{{Type: TypeClient, Match: MatchAny}}, false, "client-id=<default> | client-id=app | user=alice, client-id=app"},
		{[]Filter{{Type: TypeClient, Match: MatchExact, Name: "app"}, {Type: TypeUser, Match: MatchAny}}, true, "user=alice, client-id=app"},
		{nil, false, "client-id=<default> | client-id=app | user=<default> | user=alice | user=alice, client-id=app"},
		{nil, true, ""},
	}
	for _, tt := range tests {
		es, err := s.Match(tt.fs, tt.strict)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.String())
		}
		if g := strings.Join(got, " | "); g != tt.want {
			t.Errorf("Match(%+v, strict %v) = %q, want %q", tt.fs, tt.strict, g, tt.want)
		}
	}
	if _, err := s.Match([]Filter{{Type: TypeUser, Match: 3}}, false); err == nil {
		t.Error("match type 3 accepted")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var s Set
	s = mustWith(t, s, ent("alice", "<default>"), ProducerByteRate, 1048576)
	s = mustWith(t, s, ent("", "app"), RequestPercentage, 12.5)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Set
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Len() != 2 {
		t.Fatalf("decoded %d entities from %s", back.Len(), data)
	}
	if v, ok := back.Get(ent("alice", "<default>"), ProducerByteRate); !ok || v != 1048576 {
		t.Fatalf("alice: %v %v", v, ok)
	}
	if v, ok := back.Get(ent("", "app"), RequestPercentage); !ok || v != 12.5 {
		t.Fatalf("app: %v %v", v, ok)
	}
	if err := json.Unmarshal([]byte(`{"entities":[{"user":"a","quotas":{"producer_byte_rate":-1}}]}`), &back); err == nil {
		t.Fatal("a negative stored quota was accepted")
	}
}

// fakeClock is a clock the test advances.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestHeldToRate drives a client that sends as fast as its throttle
// allows: after the first window's burst it is held to its rate.
func TestHeldToRate(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	m, err := NewManager(Config{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	const rate = 1 << 20
	var s Set
	m.SetQuotas(mustWith(t, s, ent("", "fast"), ProducerByteRate, rate))
	if d := m.Record(ProducerByteRate, "u", "other", 1e9); d != 0 {
		t.Fatalf("a client without a quota was throttled %v", d)
	}
	start := clk.t
	var sent, measured float64
	for clk.t.Sub(start) < 60*time.Second {
		const req = 256 << 10
		d := m.Record(ProducerByteRate, "u", "fast", req)
		sent += req
		if clk.t.Sub(start) >= 20*time.Second {
			measured += req
		}
		clk.t = clk.t.Add(d + time.Millisecond)
	}
	// Over the 40 s after the first 20, the rate is the limit (within
	// one request of rounding).
	got := measured / 40
	if got < rate*0.97 || got > rate*1.03 {
		t.Fatalf("held to %.0f B/s, want %d ± 3%%", got, rate)
	}
	// The burst is one window's worth at most.
	if sent > rate*(60+11)+256<<10 {
		t.Fatalf("sent %.0f bytes in 60 s, more than the rate plus one window", sent)
	}
	st := m.Stats()
	if len(st) != 1 || st[0].Who != (Sharer{Client: "fast"}) || st[0].Throttle == 0 {
		t.Fatalf("stats %+v", st)
	}
	if st[0].Rate < rate*0.9 || st[0].Rate > rate*1.1 {
		t.Fatalf("measured rate %.0f, want about %d", st[0].Rate, rate)
	}
}

// TestCheck: the strict check refuses only while the account is below
// zero, and removing the quota lifts it at once.
func TestCheck(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	m, _ := NewManager(Config{WindowNum: 2, WindowSize: time.Second, Now: clk.now})
	var s Set
	s = mustWith(t, s, ent("<default>", ""), ControllerMutationRate, 5)
	m.SetQuotas(s)
	if d := m.Check(ControllerMutationRate, "u", "c"); d != 0 {
		t.Fatalf("fresh account refused: %v", d)
	}
	if d := m.Record(ControllerMutationRate, "u", "c", 20); d != 2*time.Second {
		t.Fatalf("20 mutations over a 10-token bucket at 5/s: throttle %v, want 2s", d)
	}
	if d := m.Check(ControllerMutationRate, "u", "c"); d != 2*time.Second {
		t.Fatalf("check %v, want 2s", d)
	}
	clk.t = clk.t.Add(2 * time.Second)
	if d := m.Check(ControllerMutationRate, "u", "c"); d != 0 {
		t.Fatalf("after the refill: %v", d)
	}
	m.SetQuotas(Set{})
	if d := m.Record(ControllerMutationRate, "u", "c", 1e6); d != 0 {
		t.Fatalf("throttled with no quota: %v", d)
	}
}

func TestSweep(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	m, _ := NewManager(Config{Now: clk.now})
	var s Set
	m.SetQuotas(mustWith(t, s, ent("", "<default>"), ConsumerByteRate, 100))
	for i := 0; i < 100; i++ {
		m.Record(ConsumerByteRate, "", string(rune('a'+i%26))+string(rune('a'+i/26)), 10)
	}
	if n := len(m.Stats()); n != 100 {
		t.Fatalf("%d accounts, want 100", n)
	}
	clk.t = clk.t.Add(time.Minute)
	m.Record(ConsumerByteRate, "", "last", 1)
	if n := len(m.Stats()); n != 1 {
		t.Fatalf("%d accounts after a minute idle, want 1", n)
	}
}

func BenchmarkRecordNoQuota(b *testing.B) {
	m, _ := NewManager(Config{})
	for i := 0; i < b.N; i++ {
		m.Record(ProducerByteRate, "ANONYMOUS", "client", 1024)
	}
}

func BenchmarkRecord(b *testing.B) {
	m, _ := NewManager(Config{})
	var s Set
	s, _ = s.With(ent("", "client"), []Op{{Key: ProducerByteRate, Value: 1 << 40}})
	m.SetQuotas(s)
	for i := 0; i < b.N; i++ {
		m.Record(ProducerByteRate, "ANONYMOUS", "client", 1024)
	}
}
