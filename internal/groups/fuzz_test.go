package groups

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzGroupOps drives one group with a sequence of JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup, OffsetCommit, static restarts and clock advances
// decoded from the input, and checks after every step:
//
//  1. the coordinator never panics and answers every JoinGroup and
//     SyncGroup at most once;
//  2. generations only grow: a successful JoinGroup never names a
//     generation below one already handed out, and all successful joins
//     of one generation agree on its leader and protocol;
//  3. every successful SyncGroup answer in generation g is exactly what
//     g's leader assigned to that member (or to the static member it
//     replaced), so no two members of one generation are handed the same
//     assignment;
//  4. a successful OffsetCommit or Heartbeat comes from a member of the
//     newest generation handed out, not one that left or was fenced: a
//     fenced member's commit is always rejected.
func FuzzGroupOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 4, 0, 5, 40, 2, 0, 3, 1, 0, 2})
	f.Add([]byte{6, 0, 6, 0, 0, 1, 1, 3, 1, 1, 6, 0, 1, 3, 4, 3, 7, 1, 5, 200, 5, 200})
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1, 1, 5, 255, 5, 255, 5, 255, 2, 0, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		runGroupOps(t, data)
	})
}

// TestGroupOpsProperty runs FuzzGroupOps's checks over seeded random
// sequences, so that plain `go test` covers them.
func TestGroupOpsProperty(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 50
	}
	for seed := 0; seed < n; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		data := make([]byte, 400)
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runGroupOps(t, data) })
	}
}

const staticClient = 3 // client 3 is a static member

type fuzzClient struct {
	memberID string
	gen      int32 // generation of its last successful join
	leader   bool
	members  []string // the member list if it leads gen
	join     *joinCall
	joinSeen bool
	sync     *syncCall
	syncGen  int32
	syncSeen bool
}

type groupModel struct {
	t          *testing.T
	maxGen     int32
	leaderOf   map[int32]string
	protoOf    map[int32]string
	membersOf  map[int32]map[string]bool
	assigned   map[int32]map[string]string // what the leader assigned
	aliasOf    map[int32]map[string]string // static member id -> the id it replaced, per generation
	dead       map[string]bool             // member ids that left or were fenced
	receivedBy map[int32]map[string]string // assignment -> member that received it
}

func runGroupOps(t *testing.T, data []byte) {
	h := newHarness(t, nil)
	defer h.c.Close()
	m := &groupModel{t: t, leaderOf: map[int32]string{}, protoOf: map[int32]string{},
		membersOf: map[int32]map[string]bool{}, assigned: map[int32]map[string]string{},
		aliasOf: map[int32]map[string]string{}, dead: map[string]bool{}, receivedBy: map[int32]map[string]string{}}
	var cs [4]fuzzClient
	var offset int64
	for i := 0; i+1 < len(data); i += 2 {
		op, arg := data[i]%8, data[i+1]
		k := int(arg % 4)
		c := &cs[k]
		o := joinOpt{protocols: []string{"range", "roundrobin"}}
		if k == staticClient {
			o.instance = "static"
		}
		if k == 1 {
			o.protocols = []string{"roundrobin"}
		}
		switch op {
		case 0: // join (or rejoin)
			if c.join != nil && !c.joinSeen {
				continue
			}
			c.join, c.joinSeen = h.join("g", c.memberID, o), false
		case 1: // sync
			if c.memberID == "" || c.gen == 0 || (c.sync != nil && !c.syncSeen) {
				continue
			}
			var assign map[string]string
			if c.leader {
				assign = map[string]string{}
				for _, id := range c.members {
					assign[id] = fmt.Sprintf("g%d:%s", c.gen, id)
				}
				if m.assigned[c.gen] == nil {
					m.assigned[c.gen] = assign
				}
			}
			c.sync, c.syncGen, c.syncSeen = h.sync("g", c.memberID, c.gen, assign), c.gen, false
		case 2: // heartbeat
			if c.memberID == "" {
				continue
			}
			inst := ""
			if k == staticClient {
				inst = "static"
			}
			if code := h.heartbeat("g", c.memberID, c.gen, inst); code == 0 {
				m.checkLive("heartbeat", c.memberID, c.gen)
			} else if code == errUnknownMemberID || code == errFencedInstanceID {
				c.memberID = ""
			}
		case 3: // leave
			if c.memberID == "" {
				continue
			}
			r := h.c.LeaveGroup(nil, &kmsg.LeaveGroupRequest{Version: 1, Group: "g", MemberID: c.memberID})
			if r.ErrorCode == 0 {
				m.dead[c.memberID] = true
			}
			c.memberID = ""
		case 4, 7: // commit (7: with a stale generation)
			gen := c.gen
			if op == 7 {
				gen--
			}
			offset++
			if code := h.commit("g", c.memberID, gen, "t", 0, offset); code == 0 {
				if c.memberID != "" || gen >= 0 { // not a simple commit to an empty group
					m.checkLive("commit", c.memberID, gen)
				}
				if got := h.fetch("g", "t", 0); got != offset {
					t.Fatalf("committed %d, fetched %d", offset, got)
				}
			}
		case 5: // time passes
			h.clock.Advance(time.Duration(arg) * 100 * time.Millisecond)
		case 6: // the static member restarts with a fresh member id
			if k != staticClient || (c.join != nil && !c.joinSeen) {
				continue
			}
			old := c.memberID
			c.memberID = ""
			c.join, c.joinSeen = h.join("g", "", o), false
			if r := c.join.get(); r != nil && r.ErrorCode == 0 && old != "" && r.MemberID != old {
				m.dead[old] = true
				if m.aliasOf[r.Generation] == nil {
					m.aliasOf[r.Generation] = map[string]string{}
				}
				m.aliasOf[r.Generation][r.MemberID] = old
			}
		}
		// Collect answers delivered by this step (to any client).
		for k := range cs {
			m.collect(k, &cs[k])
		}
	}
}

func (m *groupModel) collect(k int, c *fuzzClient) {
	if c.join != nil && !c.joinSeen {
		if r := c.join.get(); r != nil {
			c.joinSeen = true
			switch r.ErrorCode {
			case 0:
				m.checkJoin(r)
				c.memberID, c.gen = r.MemberID, r.Generation
				c.leader, c.members = r.LeaderID == r.MemberID, nil
				for _, mm := range r.Members {
					c.members = append(c.members, mm.MemberID)
				}
			case errMemberIDRequired:
				c.memberID = r.MemberID
			case errUnknownMemberID, errFencedInstanceID:
				c.memberID = ""
			}
		}
	}
	if c.sync != nil && !c.syncSeen {
		if r := c.sync.get(); r != nil {
			c.syncSeen = true
			if r.ErrorCode == 0 {
				m.checkSync(c.memberID, c.syncGen, string(r.MemberAssignment))
			}
		}
	}
}

func (m *groupModel) checkJoin(r *kmsg.JoinGroupResponse) {
	g := r.Generation
	if g < m.maxGen {
		m.t.Fatalf("JoinGroup handed out generation %d after %d", g, m.maxGen)
	}
	m.maxGen = g
	if l, ok := m.leaderOf[g]; ok && l != r.LeaderID {
		// A static leader replaced in place keeps the generation under its new id.
		if m.aliasOf[g][r.LeaderID] != l && m.aliasOf[g][l] != r.LeaderID {
			m.t.Fatalf("generation %d has leaders %s and %s", g, l, r.LeaderID)
		}
	}
	m.leaderOf[g] = r.LeaderID
	if p, ok := m.protoOf[g]; ok && p != *r.Protocol {
		m.t.Fatalf("generation %d has protocols %s and %s", g, p, *r.Protocol)
	}
	m.protoOf[g] = *r.Protocol
	if *r.Protocol != "roundrobin" && *r.Protocol != "range" {
		m.t.Fatalf("protocol %q selected", *r.Protocol)
	}
	if m.membersOf[g] == nil {
		m.membersOf[g] = map[string]bool{}
	}
	m.membersOf[g][r.MemberID] = true
	for _, mm := range r.Members {
		m.membersOf[g][mm.MemberID] = true
	}
}

func (m *groupModel) checkSync(member string, g int32, got string) {
	want, ok := m.assigned[g][member]
	if alias, isAlias := m.aliasOf[g][member]; isAlias && !ok {
		want, ok = m.assigned[g][alias]
		member = alias
	}
	if !ok {
		want = ""
	}
	if got != want {
		m.t.Fatalf("SyncGroup gave member %s of generation %d %q; its leader assigned %q", member, g, got, want)
	}
	if got == "" {
		return
	}
	if m.receivedBy[g] == nil {
		m.receivedBy[g] = map[string]string{}
	}
	if prev, ok := m.receivedBy[g][got]; ok && prev != member {
		m.t.Fatalf("generation %d: assignment %q handed to %s and %s", g, got, prev, member)
	}
	m.receivedBy[g][got] = member
}

// checkLive asserts that a member whose request succeeded belongs to the
// newest generation.
func (m *groupModel) checkLive(what, member string, g int32) {
	if g != m.maxGen {
		m.t.Fatalf("%s from %s accepted in generation %d; newest is %d", what, member, g, m.maxGen)
	}
	if !m.membersOf[g][member] && m.aliasOf[g][member] == "" {
		m.t.Fatalf("%s from %s accepted; not a member of generation %d", what, member, g)
	}
	if m.dead[member] {
		m.t.Fatalf("%s from %s accepted after it left or was fenced", what, member)
	}
}
