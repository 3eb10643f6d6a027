package quota

import "fmt"

// Sharer is who shares one limit: the user and client id that a
// request's usage is counted under (empty where the matched level does
// not name that part). It labels the per-entity metrics.
type Sharer struct {
	User, Client string
}

// Resolve finds the limit on key for a request from user with clientID,
// in Kafka's precedence order (see the package doc), and who shares it.
// ok is false when no quota applies.
func (s Set) Resolve(k Key, user, clientID string) (limit float64, who Sharer, ok bool) {
	if len(s.m) == 0 {
		return 0, who, false
	}
	both := Sharer{User: user, Client: clientID}
	rules := [...]struct {
		e   Entity
		who Sharer
	}{
		{Entity{HasUser: true, User: user, HasClient: true, Client: clientID}, both},
		{Entity{HasUser: true, User: user, HasClient: true, ClientDefault: true}, both},
		{Entity{HasUser: true, User: user}, Sharer{User: user}},
		{Entity{HasUser: true, UserDefault: true, HasClient: true, Client: clientID}, both},
		{Entity{HasUser: true, UserDefault: true, HasClient: true, ClientDefault: true}, both},
		{Entity{HasUser: true, UserDefault: true}, Sharer{User: user}},
		{Entity{HasClient: true, Client: clientID}, Sharer{Client: clientID}},
		{Entity{HasClient: true, ClientDefault: true}, Sharer{Client: clientID}},
	}
	for _, r := range rules {
		if v, found := s.m[r.e][k]; found {
			return v, r.who, true
		}
	}
	return 0, who, false
}

// Match types of a DescribeClientQuotas filter component.
const (
	MatchExact   int8 = 0 // the part is this name
	MatchDefault int8 = 1 // the part is the default
	MatchAny     int8 = 2 // the part is present, named or default
)

// Filter is one component of a DescribeClientQuotas filter.
type Filter struct {
	Type  string
	Match int8
	Name  string // for MatchExact
}

// Match returns the entities whose quotas a DescribeClientQuotas with
// these filters lists: each filter must hold for the entity and, when
// strict, the entity has no part the filters do not name.
func (s Set) Match(fs []Filter, strict bool) ([]Entity, error) {
	var wantUser, wantClient bool
	for _, f := range fs {
		switch f.Type {
		case TypeUser:
			if wantUser {
				return nil, fmt.Errorf("the filter names user twice")
			}
			wantUser = true
		case TypeClient:
			if wantClient {
				return nil, fmt.Errorf("the filter names client-id twice")
			}
			wantClient = true
		case TypeIP:
			return nil, fmt.Errorf("ip quotas are not supported; filter on user or client-id")
		default:
			return nil, fmt.Errorf("unknown quota entity type %q in the filter; want user or client-id", f.Type)
		}
		if f.Match < MatchExact || f.Match > MatchAny {
			return nil, fmt.Errorf("match type %d: want 0 (exact), 1 (default) or 2 (any)", f.Match)
		}
	}
	var out []Entity
	for _, e := range s.Entities() {
		if strict && (e.HasUser != wantUser || e.HasClient != wantClient) {
			continue
		}
		ok := true
		for _, f := range fs {
			has, def, name := e.HasUser, e.UserDefault, e.User
			if f.Type == TypeClient {
				has, def, name = e.HasClient, e.ClientDefault, e.Client
			}
			switch {
			case !has:
				ok = false
			case f.Match == MatchExact:
				ok = ok && !def && name == f.Name
			case f.Match == MatchDefault:
				ok = ok && def
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}
