package txn

import "testing"

// FuzzDecodeTxn feeds arbitrary keys and values to the state-record
// decoder. Invariants: it never panics; a record it accepts has a known
// state and the id its key names, and encodes back to a record that
// decodes to the same state.
func FuzzDecodeTxn(f *testing.F) {
	t := &Txn{ID: "a", PID: 7, Epoch: 2, PrevPID: -1, PrevEpoch: -1, State: Ongoing, TimeoutMs: 1000,
		Partitions: []TopicPartition{{"t", 0}}, Offsets: map[string][]Offset{"g": {{Topic: "t", Partition: 0, Offset: 5}}}, StartMs: 1}
	f.Add(recordKey("a"), encodeTxn(t))
	f.Add(recordKey(""), []byte(`{"v":1,"id":"","state":"Empty"}`))
	f.Add([]byte("x"), []byte(`{}`))
	f.Fuzz(func(tt *testing.T, key, value []byte) {
		got, err := decodeTxn(key, value)
		if err != nil {
			return
		}
		if got.State < Empty || got.State > CompleteAbort || string(recordKey(got.ID)) != string(key) {
			tt.Fatalf("accepted an inconsistent record: %+v", got)
		}
		again, err := decodeTxn(recordKey(got.ID), encodeTxn(got))
		if err != nil || again.State != got.State || again.PID != got.PID || again.Epoch != got.Epoch || len(again.Partitions) != len(got.Partitions) {
			tt.Fatalf("re-encoding changed the record: %+v -> %+v (%v)", got, again, err)
		}
	})
}
