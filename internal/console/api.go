package console

// JSON API, read-only unless Config.Admin:
//
//	GET    /api/v1/cluster                       broker info, readiness, console features
//	GET    /api/v1/history?series=A,B&prefix=P   chart history (at most 64 series)
//	GET    /api/v1/topics?q=TEXT&limit=N         topics (name contains TEXT), with totals and produce rate
//	GET    /api/v1/topics/{topic}                one topic: partitions, configs with source
//	GET    /api/v1/topics/{topic}/partitions     its partitions
//	GET    /api/v1/topics/{topic}/partitions/{p}/records?limit=N[&offset=O|&timestamp=MS]
//	                                             records (latest N when neither offset nor timestamp)
//	GET    /api/v1/stuck                         partitions whose last stable offset has lagged the
//	                                             high watermark for longer than the transaction timeout bound
//	GET    /api/v1/quotas                        client quotas and the accounts in use (quotas.go)
//	GET    /api/v1/groups                        groups (classic, consumer, share) with type, state, epoch, total lag
//	GET    /api/v1/groups/{group}                one group: members, assignments, offsets, lag; a share
//	                                             group's share partitions and records in flight (sharegroups.go)
//	POST   /api/v1/topics                        {"name","partitions","configs"}  (admin)
//	DELETE /api/v1/topics/{topic}                                                 (admin)
//	POST   /api/v1/groups/{group}/reset          {"topic","partitions","to":"earliest|latest|offset","offset"} (admin)
//	*      /api/v1/registry/...                  the schema registry's REST API, when Config.Schemas is set
//
// Errors are {"error": "..."} with 400 (bad parameter), 401 (no or a
// wrong login, with SASL on), 403 (admin off, or the user's ACLs refuse
// it: see access.go), 404 (unknown topic, partition, group or route),
// 409 (Kafka refused a mutation) or 5xx. Lists and record reads are bounded:
// larger limits are cut to the maximum, which the response reports.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker"
)

// Bounds of API responses.
const (
	maxTopicsListed  = 1000
	maxHistorySeries = 64
)

func (s *Server) apiRoutes() {
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request)) {
		s.mux.Handle(pattern, s.guard(http.HandlerFunc(f)))
	}
	h("GET /api/v1/cluster", s.apiCluster)
	h("GET /api/v1/history", s.apiHistory)
	h("GET /api/v1/topics", s.apiTopics)
	h("GET /api/v1/topics/{topic}", s.apiTopic)
	h("GET /api/v1/topics/{topic}/partitions", s.apiPartitions)
	h("GET /api/v1/topics/{topic}/partitions/{partition}/records", s.apiRecords)
	h("GET /api/v1/stuck", s.apiStuck)
	h("GET /api/v1/quotas", s.apiQuotas) // quotas.go
	h("GET /api/v1/groups", s.apiGroups)
	h("GET /api/v1/groups/{group}", s.apiGroup)
	h("POST /api/v1/topics", s.admin(s.apiCreateTopic))
	h("DELETE /api/v1/topics/{topic}", s.admin(s.apiDeleteTopic))
	h("POST /api/v1/groups/{group}/reset", s.admin(s.apiResetGroup))
	if s.cfg.Schemas != nil {
		s.mux.Handle("/api/v1/registry/", s.guard(http.StripPrefix("/api/v1/registry", s.cfg.Schemas.Handler())))
	}
	h("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("no API route %s %s", r.Method, r.URL.Path))
	})
}

// apiError is an error with the HTTP status it maps to.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// fail writes err: its own status for an apiError, else 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeErr(w, ae.status, ae.msg)
		return
	}
	s.log.Warn("console API request failed", "path", r.URL.Path, "err", err)
	writeErr(w, http.StatusInternalServerError, err.Error())
}

// intParam parses an optional integer query parameter: def when absent,
// a 400 when malformed or below lo, cut to hi when above it.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badRequest("%s=%q: want an integer", name, v)
	}
	if n < lo {
		return 0, badRequest("%s=%d: want at least %d", name, n, lo)
	}
	return min(n, hi), nil
}

// clusterInfo is GET /api/v1/cluster.
type clusterInfo struct {
	broker.Info
	Ready      bool   `json:"ready"`
	ReadyError string `json:"ready_error,omitempty"`
	Admin      bool   `json:"admin"`
	User       string `json:"user,omitempty"`
	// Authorization: the broker checks ACLs, and the console applies
	// them to User (or to ANONYMOUS without a login).
	Authorization bool     `json:"authorization"`
	Features      []string `json:"features"` // console pages the broker supports
	Connections   int64    `json:"connections"`
	SampleMs      int64    `json:"sample_ms"`
}

func (s *Server) apiCluster(w http.ResponseWriter, r *http.Request) {
	ci := clusterInfo{
		Info:  s.b.Info(),
		Ready: true,
		Admin: s.cfg.Admin,
		User:  User(r.Context()),

		Authorization: s.b.AuthorizationEnabled(),
		Features:      []string{"overview", "topics", "groups"},
		SampleMs:      s.cfg.SampleEvery.Milliseconds(),
	}
	if s.cfg.Schemas != nil {
		ci.Features = append(ci.Features, "schemas")
	}
	ci.Connections = s.b.Stats().Connections
	if err := s.b.Ready(); err != nil {
		ci.Ready, ci.ReadyError = false, err.Error()
	}
	writeJSON(w, http.StatusOK, ci)
}

func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	split := func(v string) []string {
		if v == "" {
			return nil
		}
		return strings.Split(v, ",")
	}
	q := r.URL.Query()
	names, prefixes := split(q.Get("series")), split(q.Get("prefix"))
	if len(names) == 0 && len(prefixes) == 0 {
		s.fail(w, r, badRequest("give series=NAME,... or prefix=PREFIX,..."))
		return
	}
	if len(names)+len(prefixes) > maxHistorySeries {
		s.fail(w, r, badRequest("at most %d series and prefixes", maxHistorySeries))
		return
	}
	writeJSON(w, http.StatusOK, s.hist.query(names, prefixes, maxHistorySeries, s.seriesAllowed(r)))
}

// topicRow is one row of the topics table.
type topicRow struct {
	Name          string  `json:"name"`
	Partitions    int     `json:"partitions"`
	Records       int64   `json:"records"` // offsets held: high watermark minus start, summed
	SizeBytes     int64   `json:"size_bytes"`
	RetentionMs   string  `json:"retention_ms"`
	CleanupPolicy string  `json:"cleanup_policy"`
	ProduceRate   float64 `json:"produce_rate"` // records/s over the last sample
	// ConfigsHidden: the user may not DESCRIBE_CONFIGS the topic, so
	// RetentionMs and CleanupPolicy are empty.
	ConfigsHidden bool `json:"configs_hidden,omitempty"`
}

func (s *Server) apiTopics(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", maxTopicsListed, 1, maxTopicsListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	rows := []topicRow{}
	total := 0
	for _, t := range s.b.Topics() {
		if q != "" && !strings.Contains(strings.ToLower(t.Name), q) {
			continue
		}
		if !s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
			continue // Kafka's Metadata leaves such topics out too
		}
		total++
		if int64(len(rows)) >= limit {
			continue
		}
		records, size, _ := t.Totals()
		rate, _ := s.hist.latest(topicSeries(t.Name, "in.records"))
		hidden := s.hideConfigs(r, &t)
		rows = append(rows, topicRow{
			Name: t.Name, Partitions: len(t.Partitions), Records: records, SizeBytes: size,
			RetentionMs: t.Config("retention.ms"), CleanupPolicy: t.Config("cleanup.policy"), ProduceRate: rate,
			ConfigsHidden: hidden,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": rows, "total": total, "limit": limit})
}

// stuckRow is one partition of GET /api/v1/stuck.
type stuckRow struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	HighWatermark   int64  `json:"high_watermark"`
	LastStable      int64  `json:"last_stable_offset"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	OpenSinceMs     int64  `json:"open_since_ms"`
	CoordinatorLive bool   `json:"coordinator_live"`
}

// apiStuck lists the partitions whose last stable offset has lagged the
// high watermark for longer than the transaction timeout bound: a
// transaction there is hanging (see sluice txn find-hanging), and
// read_committed consumers stop before it. Only topics the user may
// describe are listed.
func (s *Server) apiStuck(w http.ResponseWriter, r *http.Request) {
	rows := []stuckRow{}
	for _, p := range s.b.StuckPartitions() {
		if !s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, p.Topic) {
			continue
		}
		rows = append(rows, stuckRow{Topic: p.Topic, Partition: p.Partition, HighWatermark: p.HighWatermark, LastStable: p.LastStable,
			ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, OpenSinceMs: p.OpenSince.UnixMilli(), CoordinatorLive: p.CoordinatorLive})
	}
	writeJSON(w, http.StatusOK, map[string]any{"partitions": rows})
}

// topic is the request's {topic}, which the user must be allowed op
// on (checked first, so that a refusal says nothing of existence); its
// configs are left out without DESCRIBE_CONFIGS.
func (s *Server) topic(r *http.Request, op kmsg.ACLOperation) (broker.TopicInfo, error) {
	name := r.PathValue("topic")
	if err := s.need(r, op, kmsg.ACLResourceTypeTopic, name); err != nil {
		return broker.TopicInfo{}, err
	}
	t, ok := s.b.Topic(name)
	if !ok {
		return t, notFound("topic %q does not exist", name)
	}
	s.hideConfigs(r, &t)
	return t, nil
}

// hideConfigs empties t's configs unless the user may DESCRIBE_CONFIGS
// the topic, as DescribeConfigs would refuse them; it reports whether
// it did.
func (s *Server) hideConfigs(r *http.Request, t *broker.TopicInfo) bool {
	if !s.may(r, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, t.Name) {
		t.Configs = []broker.ConfigEntry{}
		return true
	}
	return false
}

// visibleGroup is g with only the offsets of topics the user may
// DESCRIBE (as OffsetFetch answers), its lag summed over those.
func (s *Server) visibleGroup(r *http.Request, g broker.GroupInfo) broker.GroupInfo {
	if !s.b.AuthorizationEnabled() {
		return g
	}
	offs := make([]broker.GroupOffsetInfo, 0, len(g.Offsets))
	allowed := map[string]bool{}
	g.Lag = 0
	for _, o := range g.Offsets {
		ok, seen := allowed[o.Topic]
		if !seen {
			ok = s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, o.Topic)
			allowed[o.Topic] = ok
		}
		if ok {
			offs = append(offs, o)
			g.Lag += o.Lag
		}
	}
	g.Offsets = offs
	return g
}

func (s *Server) apiTopic(w http.ResponseWriter, r *http.Request) {
	t, err := s.topic(r, kmsg.ACLOperationDescribe)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	records, size, tr := t.Totals()
	out := map[string]any{"topic": t, "records": records, "size_bytes": size, "traffic": tr,
		"can_delete": s.may(r, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, t.Name)} // the page offers Delete only then
	if !s.may(r, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, t.Name) {
		out["configs_hidden"] = true
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) apiPartitions(w http.ResponseWriter, r *http.Request) {
	t, err := s.topic(r, kmsg.ACLOperationDescribe)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"partitions": t.Partitions})
}

func (s *Server) apiGroups(w http.ResponseWriter, r *http.Request) {
	gs := s.b.Groups()
	type row struct {
		ID           string `json:"id"`
		Type         string `json:"type"` // classic, consumer (KIP-848) or share (KIP-932)
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Protocol     string `json:"protocol"`
		Members      int    `json:"members"`
		Topics       int    `json:"topics"`
		Lag          int64  `json:"lag"`
		// Epoch: a classic group's generation, a consumer or share
		// group's group epoch.
		Epoch int32 `json:"epoch"`
	}
	rows := make([]row, 0, len(gs))
	for _, g := range gs {
		if !s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.ID) {
			continue // as ListGroups leaves them out
		}
		g = s.visibleGroup(r, g)
		topics := map[string]bool{}
		for _, o := range g.Offsets {
			topics[o.Topic] = true
		}
		rows = append(rows, row{g.ID, g.Type, g.State, g.ProtocolType, g.Protocol, g.Members, len(topics), g.Lag, g.Epoch})
	}
	// Share groups, from the share coordinator through Kafka requests
	// (sharegroups.go).
	out := map[string]any{}
	ctx, cancel := contextFor(r, 5*time.Second)
	defer cancel()
	ids, err := s.shareGroupIDs(ctx, r)
	var shares []shareGroupInfo
	if err == nil {
		shares, _, err = s.shareGroups(ctx, r, ids, false)
	}
	if err != nil {
		out["share_groups_error"] = "share groups: " + err.Error()
	}
	for _, g := range shares {
		topics := map[string]bool{}
		for _, p := range g.Partitions {
			topics[p.Topic] = true
		}
		rows = append(rows, row{g.ID, g.Type, g.State, g.ProtocolType, g.Protocol, g.Members, len(topics), g.Lag, g.Epoch})
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.ID, b.ID) })
	out["groups"] = rows
	writeJSON(w, http.StatusOK, out)
}

// memberInfo is a group member as DescribeGroups, ConsumerGroupDescribe
// or ShareGroupDescribe reports it, with its assignment decoded.
type memberInfo struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	// MemberEpoch: a consumer-protocol or share group member's epoch.
	MemberEpoch *int32             `json:"member_epoch,omitempty"`
	Assigned    map[string][]int32 `json:"assigned"` // topic -> partitions
}

func (s *Server) apiGroup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("group")
	if err := s.need(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id); err != nil {
		s.fail(w, r, err)
		return
	}
	var gi *broker.GroupInfo
	for _, g := range s.b.Groups() {
		if g.ID == id {
			g = s.visibleGroup(r, g)
			gi = &g
			break
		}
	}
	if gi == nil {
		if !s.apiShareGroup(w, r, id) {
			s.fail(w, r, notFound("group %q does not exist", id))
		}
		return
	}
	ctx, cancel := contextFor(r, 5*time.Second)
	defer cancel()
	var (
		members []memberInfo
		err     error
	)
	if gi.Type == "consumer" {
		members, err = s.consumerGroupMembers(ctx, id)
	} else {
		members, err = s.classicGroupMembers(ctx, id)
	}
	if members == nil {
		members = []memberInfo{}
	}
	out := map[string]any{"group": gi, "members": members}
	if err != nil {
		out["members_error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// classicGroupMembers describes a classic group's members (DescribeGroups).
func (s *Server) classicGroupMembers(ctx context.Context, id string) ([]memberInfo, error) {
	described, err := s.adm.DescribeGroups(ctx, id)
	d, err := describedGroup(described, err, id, func(d *kadm.DescribedGroup) error { return d.Err })
	if d == nil {
		return nil, err
	}
	var members []memberInfo
	for _, m := range d.Members {
		mi := memberInfo{MemberID: m.MemberID, InstanceID: orEmpty(m.InstanceID), ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assigned: map[string][]int32{}}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				mi.Assigned[t.Topic] = slices.Sorted(slices.Values(t.Partitions))
			}
		}
		members = append(members, mi)
	}
	return members, nil
}

// consumerGroupMembers describes a consumer-protocol (KIP-848) group's
// members with their epochs (ConsumerGroupDescribe).
func (s *Server) consumerGroupMembers(ctx context.Context, id string) ([]memberInfo, error) {
	described, err := s.adm.DescribeConsumerGroups(ctx, id)
	d, err := describedGroup(described, err, id, func(d *kadm.DescribedConsumerGroup) error { return d.Err })
	if d == nil {
		return nil, err
	}
	var members []memberInfo
	for _, m := range d.Members {
		members = append(members, memberInfo{MemberID: m.MemberID, InstanceID: orEmpty(m.InstanceID), ClientID: m.ClientID,
			ClientHost: m.ClientHost, MemberEpoch: &m.MemberEpoch, Assigned: assignedOf(m.Assignment)})
	}
	return members, nil
}

// describedGroup picks group id out of a describe answer (described,
// err): nil when the answer leaves the group out, or with the request's
// or the group's error.
func describedGroup[G any](described map[string]G, err error, id string, groupErr func(*G) error) (*G, error) {
	if err != nil {
		return nil, err
	}
	d, ok := described[id]
	if !ok {
		return nil, nil
	}
	if err := groupErr(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
