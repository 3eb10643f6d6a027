package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxBodyBytes bounds a mutation's JSON body.
const maxBodyBytes = 64 << 10

// admin wraps a mutating handler: 403 unless Config.Admin, and only
// same-origin JSON requests (a cross-site form cannot send
// application/json without a CORS preflight, which this server never
// allows).
func (s *Server) admin(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Admin {
			writeErr(w, http.StatusForbidden, "admin actions are off; start sluice serve with --http-admin to allow them")
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				writeErr(w, http.StatusForbidden, "cross-origin request refused")
				return
			}
		}
		if r.Method != http.MethodDelete {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
				writeErr(w, http.StatusUnsupportedMediaType, "send Content-Type: application/json")
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		f(w, r)
	}
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %v", err)
	}
	return nil
}

// kafkaErr maps an error Kafka answered to 409 (refused) with its message.
func kafkaErr(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return &apiError{http.StatusConflict, err.Error()}
	}
	return err
}

func (s *Server) apiCreateTopic(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name       string            `json:"name"`
		Partitions int32             `json:"partitions"`
		Configs    map[string]string `json:"configs"`
	}
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Name == "" {
		s.fail(w, r, badRequest("name is required"))
		return
	}
	if req.Partitions == 0 {
		req.Partitions = -1 // the broker's default
	}
	configs := map[string]*string{}
	for k, v := range req.Configs {
		configs[k] = &v
	}
	ctx, cancel := contextFor(r, 15*time.Second)
	defer cancel()
	resp, err := s.adm.CreateTopic(ctx, req.Partitions, -1, configs, req.Name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		s.fail(w, r, kafkaErr(err))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"name": resp.Topic, "partitions": resp.NumPartitions})
}

func (s *Server) apiDeleteTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	ctx, cancel := contextFor(r, 15*time.Second)
	defer cancel()
	resp, err := s.adm.DeleteTopic(ctx, name)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		s.fail(w, r, notFound("topic %q does not exist", name))
		return
	}
	if err != nil {
		s.fail(w, r, kafkaErr(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": name})
}

// apiResetGroup commits new offsets for a group (which must have no
// members: Kafka refuses commits from outside a live generation).
func (s *Server) apiResetGroup(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	var req struct {
		Topic      string  `json:"topic"`
		Partitions []int32 `json:"partitions"` // empty: every partition
		To         string  `json:"to"`         // earliest, latest or offset
		Offset     int64   `json:"offset"`
	}
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	t, ok := s.b.Topic(req.Topic)
	if !ok {
		s.fail(w, r, notFound("topic %q does not exist", req.Topic))
		return
	}
	parts := req.Partitions
	if len(parts) == 0 {
		for _, p := range t.Partitions {
			parts = append(parts, p.Partition)
		}
	}
	var offs kadm.Offsets
	for _, pn := range parts {
		if pn < 0 || int(pn) >= len(t.Partitions) {
			s.fail(w, r, notFound("partition %d of %q does not exist", pn, t.Name))
			return
		}
		p := t.Partitions[pn]
		var at int64
		switch req.To {
		case "earliest":
			at = p.StartOffset
		case "latest":
			at = p.HighWatermark
		case "offset":
			if req.Offset < p.StartOffset || req.Offset > p.HighWatermark {
				s.fail(w, r, badRequest("offset %d is outside partition %d's [%d, %d]", req.Offset, pn, p.StartOffset, p.HighWatermark))
				return
			}
			at = req.Offset
		default:
			s.fail(w, r, badRequest("to=%q: want earliest, latest or offset", req.To))
			return
		}
		offs.Add(kadm.Offset{Topic: t.Name, Partition: pn, At: at, LeaderEpoch: -1})
	}
	ctx, cancel := contextFor(r, 15*time.Second)
	defer cancel()
	resp, err := s.adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		s.fail(w, r, kafkaErr(fmt.Errorf("reset offsets of %q (a group with members refuses this): %w", group, err)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "topic": t.Name, "partitions": parts})
}
