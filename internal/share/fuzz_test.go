package share

import (
	"bytes"
	"testing"
)

// FuzzStateRecords feeds arbitrary bytes to the state-log decoders.
// Invariants: no input panics or loops; a value apply accepts rebuilds a
// state whose full encoding applies to the same state again (replay is
// stable); a key decodeKey accepts is re-encoded to the same bytes.
func FuzzStateRecords(f *testing.F) {
	s := newState(3)
	s.acquire("m", []Batch{{3, 9, false}, {10, 10, true}}, 100, false, 0, Limits{LockMs: 1, DeliveryLimit: 5, MaxLocks: 100})
	_ = s.ack("m", 3, 4, []int8{1}, false, 0, Limits{LockMs: 1, DeliveryLimit: 5, MaxLocks: 100})
	f.Add(s.full(), partKey("g", TP{Partition: 2}))
	f.Add(s.takeDelta(), groupKey("g"))
	f.Add([]byte{0, 0, 2, 1, 0, 1, 2, 0}, []byte("p"))
	f.Fuzz(func(t *testing.T, v, k []byte) {
		if kind, g, tp, err := decodeKey(k); err == nil {
			var again []byte
			if kind == 'g' {
				again = groupKey(g)
			} else {
				again = partKey(g, tp)
			}
			if !bytes.Equal(again, k) {
				t.Fatalf("key %q decodes to %q %v, which encodes to %q", k, g, tp, again)
			}
		}
		st, err := apply(nil, v)
		if err != nil {
			return
		}
		if len(st.recs) > 1<<22 {
			t.Skip("too large to compare")
		}
		full := st.full()
		st2, err := apply(nil, full)
		if err != nil {
			t.Fatalf("the full encoding of an accepted value does not apply: %v", err)
		}
		if !bytes.Equal(st2.full(), full) {
			t.Fatal("replaying a full value changes it")
		}
	})
}
