package brokertest

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker"
)

// Faults is a set of fault injection rules for a broker (pass Opt to
// Start or Fast). Each rule applies to the requests of one API, the next
// n of them (n < 0: every one until Clear); the rule added first that
// still applies wins. Rules can change while the broker runs. A Faults
// is safe for concurrent use.
type Faults struct {
	mu    sync.Mutex
	rules []*rule
	seen  map[kmsg.Key]int
}

type rule struct {
	key    kmsg.Key
	left   int // < 0: unlimited
	action broker.Action
	// respond, when set, builds the action's Response per request.
	respond func(kmsg.Request) kmsg.Response
}

// NewFaults returns an empty rule set: every request is served.
func NewFaults() *Faults { return &Faults{seen: map[kmsg.Key]int{}} }

// Opt is the broker option that applies the rules.
func (f *Faults) Opt() broker.Opt { return broker.Intercept(f.intercept) }

// Fail answers the next n requests of key with the Kafka error code
// (kerr.NotLeaderForPartition.Code, say) without serving them: a failed
// Produce writes nothing.
func (f *Faults) Fail(key kmsg.Key, code int16, n int) { f.add(key, n, broker.Action{ErrorCode: code}) }

// Delay holds the next n requests of key for d before serving them.
func (f *Faults) Delay(key kmsg.Key, d time.Duration, n int) {
	f.add(key, n, broker.Action{Delay: d})
}

// Drop closes the connection of the next n requests of key without
// answering them.
func (f *Faults) Drop(key kmsg.Key, n int) { f.add(key, n, broker.Action{Drop: true}) }

// Respond answers the next n requests of key with what resp returns for
// each (its version is set to the request's).
func (f *Faults) Respond(key kmsg.Key, n int, resp func(kmsg.Request) kmsg.Response) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == 0 {
		return
	}
	f.rules = append(f.rules, &rule{key: key, left: n, respond: resp})
}

// Clear removes every rule.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Seen is how many requests of key the broker has received so far
// (whether a rule applied to them or not).
func (f *Faults) Seen(key kmsg.Key) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

func (f *Faults) add(key kmsg.Key, n int, a broker.Action) {
	if n == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{key: key, left: n, action: a})
}

func (f *Faults) intercept(r broker.Request) broker.Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := kmsg.Key(r.Key)
	f.seen[key]++
	for i, ru := range f.rules {
		if ru.key != key {
			continue
		}
		if ru.left > 0 {
			ru.left--
			if ru.left == 0 {
				f.rules = append(f.rules[:i:i], f.rules[i+1:]...)
			}
		}
		if ru.respond != nil {
			return broker.Action{Response: ru.respond(r.Kmsg)}
		}
		return ru.action
	}
	return broker.Action{}
}
