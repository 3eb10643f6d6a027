package groups

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzConsumerGroupOps drives a consumer group with a byte-coded sequence
// of member operations (join, heartbeat, leave, static leave, a topic
// growing, a coordinator reopen) and checks after each one:
//   - no partition is held (assigned or being revoked) by two members of
//     the coordinator's state;
//   - no partition is owned by two members as the members themselves see
//     it (each owns what its last answer assigned): a partition moves only
//     after its previous owner let it go;
//   - a reopened coordinator describes the group exactly as before.
func FuzzConsumerGroupOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 0, 1, 1, 2, 0, 1, 1, 4, 0, 5, 0, 1, 1})
	f.Add([]byte{0, 2, 0, 3, 1, 2, 1, 3, 3, 2, 1, 3, 0, 2, 1, 2, 5, 0})
	f.Fuzz(func(t *testing.T, data []byte) { runConsumerOps(t, data) })
}

// TestConsumerGroupOpsProperty runs FuzzConsumerGroupOps's checks over
// seeded random sequences, so that plain `go test` covers them.
func TestConsumerGroupOpsProperty(t *testing.T) {
	n := 80
	if testing.Short() {
		n = 30
	}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		data := make([]byte, 300)
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runConsumerOps(t, data) })
	}
}

func runConsumerOps(t *testing.T, data []byte) {
	ts := &topicSet{}
	ts.set("t", 5)
	ts.set("u", 2)
	h := newHarness(t, consumerCfg(ts))
	const members = 4
	ms := make([]*cmem, members)
	in := make([]bool, members)
	for i := range ms {
		topics := []string{"t"}
		if i%2 == 1 {
			topics = append(topics, "u")
		}
		ms[i] = newCmem(t, h.c, ts, "g", fmt.Sprintf("m%d", i), topics...)
		if i == 3 {
			ms[i].instance = kmsg.StringPtr("static")
		}
		if i == 2 {
			ms[i].assignor = kmsg.StringPtr("range")
		}
	}
	send := func(m *cmem, req *kmsg.ConsumerGroupHeartbeatRequest) int16 {
		r := h.c.ConsumerGroupHeartbeat(nil, Client{}, req, nil)
		return r.ErrorCode
	}
	for len(data) >= 2 {
		op, who := data[0]%6, int(data[1])%members
		data = data[2:]
		m := ms[who]
		switch op {
		case 0: // join (or rejoin in place)
			m.owned = map[string][]int32{}
			if code := m.send(m.req(0)); code == 0 {
				in[who] = true
			}
		case 1, 2: // heartbeat reporting what it owns
			if !in[who] {
				continue
			}
			if code := m.beat(); code != 0 {
				// Fenced or unknown: it gives everything up, as a client must.
				m.owned, in[who] = map[string][]int32{}, false
			}
		case 3: // leave
			if !in[who] {
				continue
			}
			epoch := int32(-1)
			if m.instance != nil {
				epoch = -2
			}
			send(m, m.req(epoch))
			m.owned, in[who] = map[string][]int32{}, false
		case 4: // a topic gains a partition
			ti := ts.get()["t"]
			if ti.Partitions < 9 {
				ts.set("t", ti.Partitions+1)
			}
		case 5: // the coordinator restarts
			before := descString(describe(t, h.c, "g"))
			h.reopen()
			for _, x := range ms {
				x.c = h.c
			}
			if after := descString(describe(t, h.c, "g")); after != before {
				t.Fatalf("after reopen:\n%s\nwant\n%s", after, before)
			}
		}
		var live []*cmem
		for i, x := range ms {
			if in[i] {
				live = append(live, x)
			}
		}
		noDoubleOwnership(t, live)
		g := h.c.lookup("g")
		if g == nil {
			continue
		}
		g.mu.Lock()
		seen := map[tp]string{}
		if g.cg != nil {
			for id, cm := range g.cg.members {
				for _, a := range []assignment{cm.Assigned, cm.Revoking} {
					for tn, ps := range a {
						for _, p := range ps {
							if o, ok := seen[tp{tn, p}]; ok {
								g.mu.Unlock()
								t.Fatalf("%s/%d held by %s and %s", tn, p, o, id)
							}
							seen[tp{tn, p}] = id
						}
					}
				}
			}
		}
		g.mu.Unlock()
	}
}
