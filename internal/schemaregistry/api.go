package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// contentType is the media type of every answer, Confluent's.
const contentType = "application/vnd.schemaregistry.v1+json"

// maxBody bounds a request body.
const maxBody = 16 << 20

// writeTimeout bounds a write to the topic.
const writeTimeout = 30 * time.Second

type handlerFunc func(w http.ResponseWriter, r *http.Request) (any, error)

func (reg *Registry) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, fn handlerFunc) {
		mux.Handle(pattern, reg.serveAPI(pattern, fn))
	}
	h("GET /{$}", func(http.ResponseWriter, *http.Request) (any, error) { return struct{}{}, nil })
	h("GET /subjects", reg.listSubjects)
	h("GET /subjects/{subject}/versions", reg.listVersions)
	h("POST /subjects/{subject}/versions", reg.register)
	h("GET /subjects/{subject}/versions/{version}", reg.getVersion)
	h("GET /subjects/{subject}/versions/{version}/schema", reg.getVersionSchema)
	h("GET /subjects/{subject}/versions/{version}/referencedby", reg.referencedBy)
	h("DELETE /subjects/{subject}/versions/{version}", reg.deleteVersion)
	h("POST /subjects/{subject}", reg.lookup)
	h("DELETE /subjects/{subject}", reg.deleteSubject)
	h("GET /schemas", reg.listSchemas)
	h("GET /schemas/types", func(http.ResponseWriter, *http.Request) (any, error) {
		return []string{typeJSON, typeProtobuf, typeAvro}, nil
	})
	h("GET /schemas/ids/{id}", reg.schemaByID)
	h("GET /schemas/ids/{id}/schema", reg.rawSchemaByID)
	h("GET /schemas/ids/{id}/subjects", reg.subjectsByID)
	h("GET /schemas/ids/{id}/versions", reg.versionsByID)
	h("GET /config", reg.getConfig)
	h("PUT /config", reg.putConfig)
	h("DELETE /config", reg.deleteConfig)
	h("GET /config/{subject}", reg.getConfig)
	h("PUT /config/{subject}", reg.putConfig)
	h("DELETE /config/{subject}", reg.deleteConfig)
	h("GET /mode", reg.getMode)
	h("PUT /mode", reg.putMode)
	h("DELETE /mode", reg.deleteMode)
	h("GET /mode/{subject}", reg.getMode)
	h("PUT /mode/{subject}", reg.putMode)
	h("DELETE /mode/{subject}", reg.deleteMode)
	h("POST /compatibility/subjects/{subject}/versions/{version}", reg.checkCompat)
	h("POST /compatibility/subjects/{subject}/versions", reg.checkCompat)
	h("/", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return nil, errf(http.StatusNotFound, codeNotFound, "HTTP 404 Not Found")
	})
	return mux
}

// serveAPI authenticates the request, runs fn and writes its answer (a
// value as JSON, a string as itself) or its error as Confluent's error
// body, counting it in the metrics under pattern.
func (reg *Registry) serveAPI(pattern string, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := reg.serveOne(w, r, fn)
		reg.metrics.request(pattern, status)
	})
}

func (reg *Registry) serveOne(w http.ResponseWriter, r *http.Request, fn handlerFunc) int {
	if reg.login != nil {
		user, err := reg.login.Check(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="Sluice schema registry"`)
			return writeErr(w, errf(http.StatusUnauthorized, codeUnauthorized, "Unauthorized: %v", err))
		}
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
	} else if user := certUser(r); user != "" {
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	v, err := fn(w, r)
	if err != nil {
		return writeErr(w, err)
	}
	if s, ok := v.(rawString); ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, string(s))
		return http.StatusOK
	}
	w.Header().Set("Content-Type", contentType)
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	e.Encode(v)
	return http.StatusOK
}

// rawString is an answer written as is (the /schema endpoints).
type rawString string

func writeErr(w http.ResponseWriter, err error) int {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errf(http.StatusInternalServerError, codeInternal, "%v", err)
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(ae.status)
	json.NewEncoder(w).Encode(struct {
		Code    int    `json:"error_code"`
		Message string `json:"message"`
	}{ae.code, ae.msg})
	return ae.status
}

func boolParam(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

// decodeBody reads a JSON request body into v.
func decodeBody(r *http.Request, v any) error {
	d := json.NewDecoder(r.Body)
	if err := d.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errf(http.StatusRequestEntityTooLarge, 413, "request body larger than %d bytes", maxBody)
		}
		return errf(http.StatusUnprocessableEntity, codeUnprocessable, "Unrecognizable request body: %v", err)
	}
	return nil
}

// parseVersion parses a version path segment: a positive number,
// "latest" or -1 (latest). latest reports the latter.
func parseVersion(s string) (n int, latest bool, err error) {
	if s == "latest" || s == "-1" {
		return 0, true, nil
	}
	n, perr := strconv.Atoi(s)
	if perr != nil || n < 1 || n > math.MaxInt32 {
		return 0, false, errInvalidVersion(s)
	}
	return n, false, nil
}

// subjectResponse is a version as GET /subjects/{s}/versions/{v} shows it.
type subjectResponse struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

func showVersion(v *version) subjectResponse {
	out := subjectResponse{Subject: v.subject, Version: v.version, ID: v.id, References: v.refs, Schema: v.schema}
	if v.typ != typeAvro {
		out.SchemaType = v.typ
	}
	return out
}

func (reg *Registry) listSubjects(w http.ResponseWriter, r *http.Request) (any, error) {
	deleted := boolParam(r, "deleted")
	prefix := r.URL.Query().Get("subjectPrefix")
	reg.mu.RLock()
	names := reg.st.subjectNames(deleted)
	reg.mu.RUnlock()
	out := []string{}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && reg.may(r, kmsg.ACLOperationDescribe, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (reg *Registry) listVersions(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationDescribe, subject); err != nil {
		return nil, err
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	vs := reg.st.versions(subject, boolParam(r, "deleted"))
	if len(vs) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = v.version
	}
	return out, nil
}

// findVersion returns the version a path names; soft-deleted versions
// only with deleted. Callers hold reg.mu.
func (reg *Registry) findVersionLocked(subject, vs string, deleted bool) (*version, error) {
	n, latest, err := parseVersion(vs)
	if err != nil {
		return nil, err
	}
	all := reg.st.versions(subject, true)
	if len(all) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	if latest {
		live := reg.st.versions(subject, deleted)
		if len(live) == 0 {
			return nil, errSubjectNotFound(subject)
		}
		return live[len(live)-1], nil
	}
	v := reg.st.subjects[subject][n]
	if v == nil || (v.deleted && !deleted) {
		return nil, errVersionNotFound(n)
	}
	return v, nil
}

func (reg *Registry) getVersion(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationRead, subject); err != nil {
		return nil, err
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	v, err := reg.findVersionLocked(subject, r.PathValue("version"), boolParam(r, "deleted"))
	if err != nil {
		return nil, err
	}
	return showVersion(v), nil
}

func (reg *Registry) getVersionSchema(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationRead, subject); err != nil {
		return nil, err
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	v, err := reg.findVersionLocked(subject, r.PathValue("version"), boolParam(r, "deleted"))
	if err != nil {
		return nil, err
	}
	return rawString(v.schema), nil
}

func (reg *Registry) referencedBy(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationRead, subject); err != nil {
		return nil, err
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	v, err := reg.findVersionLocked(subject, r.PathValue("version"), true)
	if err != nil {
		return nil, err
	}
	out := reg.st.referencedBy(v.subject, v.version)
	if out == nil {
		out = []int{}
	}
	return out, nil
}

// schemaRequest is the body of register, lookup and compatibility
// requests.
type schemaRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []Reference `json:"references"`
	ID         int         `json:"id"`
	Version    int         `json:"version"`
}

// resolveLocked returns the schemas refs name, dependencies first, and
// the references with "latest" (-1) replaced by the version it names.
// Callers hold reg.mu.
func (reg *Registry) resolveLocked(refs []Reference) ([]namedSchema, []Reference, error) {
	var out []namedSchema
	seen := map[string]bool{}
	resolved := make([]Reference, 0, len(refs))
	var walk func(refs []Reference, depth int) error
	walk = func(refs []Reference, depth int) error {
		if depth > 32 {
			return errors.New("references nest deeper than 32")
		}
		for _, ref := range refs {
			var v *version
			if ref.Version == -1 || ref.Version == 0 {
				v = reg.st.latest(ref.Subject)
			} else {
				v = reg.st.subjects[ref.Subject][ref.Version]
			}
			if v == nil {
				return fmt.Errorf("reference %q: subject %q version %d not found", ref.Name, ref.Subject, ref.Version)
			}
			if depth == 0 {
				resolved = append(resolved, Reference{Name: ref.Name, Subject: ref.Subject, Version: v.version})
			}
			if seen[ref.Name] {
				continue
			}
			seen[ref.Name] = true
			if err := walk(v.refs, depth+1); err != nil {
				return err
			}
			out = append(out, namedSchema{name: ref.Name, schema: v.schema})
		}
		return nil
	}
	if err := walk(refs, 0); err != nil {
		return nil, nil, err
	}
	if len(resolved) == 0 {
		resolved = nil
	}
	return out, resolved, nil
}

// parseRequestLocked parses a request's schema with its references.
func (reg *Registry) parseRequestLocked(req *schemaRequest) (parsed, []Reference, error) {
	if req.Schema == "" {
		return nil, nil, errf(http.StatusUnprocessableEntity, codeInvalidSchema, "Empty schema")
	}
	req.SchemaType = normType(strings.ToUpper(req.SchemaType))
	deps, refs, err := reg.resolveLocked(req.References)
	if err != nil {
		return nil, nil, errInvalidSchema(err)
	}
	p, err := parseSchema(req.SchemaType, req.Schema, deps)
	if err != nil {
		return nil, nil, errInvalidSchema(err)
	}
	return p, refs, nil
}

// parseVersionLocked parses a registered version for a compatibility
// check.
func (reg *Registry) parseVersionLocked(v *version) (parsed, error) {
	deps, _, err := reg.resolveLocked(v.refs)
	if err != nil {
		return nil, err
	}
	return parseSchema(v.typ, v.schema, deps)
}

// matchLocked finds a version of subject holding the schema text (in
// either canonical form) with refs.
func (reg *Registry) matchLocked(subject, typ, text string, refs []Reference, deleted bool) *version {
	keys := []string{dedupKey(typ, canonicalText(typ, text, false), refs), dedupKey(typ, canonicalText(typ, text, true), refs)}
	for _, v := range reg.st.versions(subject, deleted) {
		if slices.Contains(keys, dedupKey(v.typ, v.schema, v.refs)) {
			return v
		}
	}
	return nil
}

func (reg *Registry) register(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationWrite, subject); err != nil {
		return nil, err
	}
	if err := validSubject(subject); err != nil {
		return nil, err
	}
	var req schemaRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	normalize := boolParam(r, "normalize")
	if err := reg.lockWrite(r.Context()); err != nil {
		return nil, err
	}
	defer reg.wmu.Unlock()
	reg.mu.RLock()
	v, err := reg.prepareRegisterLocked(subject, &req, normalize)
	reg.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if v.version == 0 { // already registered
		return map[string]int{"id": v.id}, nil
	}
	rec := record{key: schemaKey(subject, v.version), value: schemaValue{
		Subject: subject, Version: v.version, ID: v.id, References: v.refs, Schema: v.schema}}
	if v.typ != typeAvro {
		sv := rec.value.(schemaValue)
		sv.SchemaType = v.typ
		rec.value = sv
	}
	if err := reg.write(r.Context(), rec); err != nil {
		return nil, err
	}
	return map[string]int{"id": v.id}, nil
}

// prepareRegisterLocked checks a registration and returns the version
// to write, or one with version 0 holding the id of the same schema
// registered before. Callers hold wmu and mu (read).
func (reg *Registry) prepareRegisterLocked(subject string, req *schemaRequest, normalize bool) (*version, error) {
	mode := reg.st.modeOf(subject)
	if mode == modeReadOnly {
		return nil, errNotPermitted("Subject %s is in read-only mode", subject)
	}
	if (req.ID > 0 || req.Version > 0) && mode != modeImport {
		if req.ID > 0 {
			return nil, errNotPermitted("Subject %s is not in import mode: a schema id may only be given in IMPORT mode", subject)
		}
	}
	// The same schema registered before is answered without a parse.
	req.SchemaType = normType(strings.ToUpper(req.SchemaType))
	typ := req.SchemaType
	if _, refs, err := reg.resolveLocked(req.References); err == nil && req.Schema != "" {
		if prev := reg.matchLocked(subject, typ, req.Schema, refs, false); prev != nil && (req.ID <= 0 || req.ID == prev.id) {
			return &version{id: prev.id}, nil
		}
	}
	p, refs, err := reg.parseRequestLocked(req)
	if err != nil {
		return nil, err
	}
	text := p.canonical(normalize)
	key := dedupKey(typ, text, refs)
	v := &version{subject: subject, typ: typ, refs: refs, schema: text}
	if mode == modeImport {
		v.id, v.version = req.ID, req.Version
		if v.id <= 0 {
			v.id = reg.st.maxID + 1
		} else if is := reg.st.ids[v.id]; is != nil && dedupKey(is.typ, is.schema, is.refs) != key {
			return nil, errf(http.StatusUnprocessableEntity, codeIDDoesNotMatch, "Overwrite new schema with id %d is not permitted.", v.id)
		}
		if v.version <= 0 {
			v.version = reg.st.nextVersion(subject)
		} else if old := reg.st.subjects[subject][v.version]; old != nil && old.id != v.id {
			return nil, errNotPermitted("Subject %s already has a version %d with another schema", subject, v.version)
		}
		return v, nil
	}
	var prev []parsed
	for _, old := range reg.st.versions(subject, false) {
		po, err := reg.parseVersionLocked(old)
		if err != nil {
			reg.log.Warn("schema registry: a registered version does not parse; left out of the compatibility check", "subject", subject, "version", old.version, "err", err)
			continue
		}
		if normType(old.typ) != typ {
			return nil, errIncompatible(subject, []string{fmt.Sprintf("version %d is of type %s, the new schema of type %s", old.version, old.typ, typ)})
		}
		prev = append(prev, po)
	}
	if msgs := checkCompatibility(reg.st.compatibility(subject), p, prev); len(msgs) > 0 {
		return nil, errIncompatible(subject, msgs)
	}
	if id, ok := reg.st.byKey[key]; ok {
		v.id = id
	} else {
		v.id = reg.st.maxID + 1
	}
	v.version = reg.st.nextVersion(subject)
	return v, nil
}

func errIncompatible(subject string, msgs []string) *apiError {
	d, _ := json.Marshal(msgs)
	return errf(http.StatusConflict, codeIncompatible,
		"Schema being registered is incompatible with an earlier schema for subject %q, details: %s", subject, d)
}

func validSubject(s string) error {
	if s == "" || strings.ContainsAny(s, "\x00") || len(s) > 4096 {
		return errf(http.StatusUnprocessableEntity, codeInvalidSubject, "Invalid subject %q", s)
	}
	return nil
}

// lockWrite takes wmu for a change, first reading the topic again if
// an earlier write failed (see write). It returns with wmu held only
// when the error is nil.
func (reg *Registry) lockWrite(ctx context.Context) error {
	reg.wmu.Lock()
	if !reg.stale {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := reg.resyncLocked(ctx); err != nil {
		reg.wmu.Unlock()
		return errStore(fmt.Errorf("reading the topic again after a failed write: %w", err))
	}
	return nil
}

// write writes records to the topic and, once durable, applies them.
// Callers hold wmu.
//
// A write that fails may still have reached the log (a reply lost with
// its connection), so the state is no longer known to match the topic:
// the next change first reads the topic again (lockWrite), so that
// an id written but not acknowledged is never handed out twice.
func (reg *Registry) write(ctx context.Context, recs ...record) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := reg.store.write(ctx, recs); err != nil {
		reg.stale = true
		return errStore(err)
	}
	reg.mu.Lock()
	for _, rec := range recs {
		reg.st.apply(rec)
	}
	reg.mu.Unlock()
	return nil
}

func (reg *Registry) lookup(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationRead, subject); err != nil {
		return nil, err
	}
	var req schemaRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	deleted := boolParam(r, "deleted")
	if len(reg.st.versions(subject, deleted)) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	// A schema registered before is found without a parse; one that is
	// not is parsed, to tell an invalid schema (42201) from an unknown
	// one (40403).
	req.SchemaType = normType(strings.ToUpper(req.SchemaType))
	if _, refs, err := reg.resolveLocked(req.References); err == nil && req.Schema != "" {
		if v := reg.matchLocked(subject, req.SchemaType, req.Schema, refs, deleted); v != nil {
			return showVersion(v), nil
		}
	}
	if _, _, err := reg.parseRequestLocked(&req); err != nil {
		return nil, err
	}
	return nil, errSchemaNotFound()
}

func (reg *Registry) deleteVersion(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationDelete, subject); err != nil {
		return nil, err
	}
	permanent := boolParam(r, "permanent")
	if err := reg.lockWrite(r.Context()); err != nil {
		return nil, err
	}
	defer reg.wmu.Unlock()
	reg.mu.RLock()
	if reg.st.modeOf(subject) == modeReadOnly {
		reg.mu.RUnlock()
		return nil, errNotPermitted("Subject %s is in read-only mode", subject)
	}
	// A number names a soft-deleted version too (to say so); latest is
	// the highest live one, or with permanent the highest.
	_, latest, _ := parseVersion(r.PathValue("version"))
	v, err := reg.findVersionLocked(subject, r.PathValue("version"), permanent || !latest)
	if err == nil && v.deleted && !permanent {
		err = errf(http.StatusNotFound, codeVersionSoftDeleted,
			"Subject '%s' Version %d was soft deleted.Set permanent=true to delete permanently", subject, v.version)
	}
	var refBy []int
	if err == nil {
		refBy = reg.st.referencedBy(v.subject, v.version)
	}
	reg.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if len(refBy) > 0 {
		return nil, errf(http.StatusUnprocessableEntity, codeReferenceExists,
			"One or more references exist to the schema {subject=%s,version=%d}: ids %v", subject, v.version, refBy)
	}
	if permanent {
		if !v.deleted {
			return nil, errf(http.StatusNotFound, codeVersionNotSoftDeleted,
				"Subject '%s' Version %d was not deleted first before being permanently deleted", subject, v.version)
		}
		if err := reg.write(r.Context(), record{key: schemaKey(subject, v.version)}); err != nil {
			return nil, err
		}
		return v.version, nil
	}
	sv := schemaValue{Subject: subject, Version: v.version, ID: v.id, References: v.refs, Schema: v.schema, Deleted: true}
	if v.typ != typeAvro {
		sv.SchemaType = v.typ
	}
	if err := reg.write(r.Context(), record{key: schemaKey(subject, v.version), value: sv}); err != nil {
		return nil, err
	}
	return v.version, nil
}

func (reg *Registry) deleteSubject(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationDelete, subject); err != nil {
		return nil, err
	}
	permanent := boolParam(r, "permanent")
	if err := reg.lockWrite(r.Context()); err != nil {
		return nil, err
	}
	defer reg.wmu.Unlock()
	reg.mu.RLock()
	all := reg.st.versions(subject, true)
	live := reg.st.versions(subject, false)
	mode := reg.st.modeOf(subject)
	var refBy []int
	for _, v := range live {
		refBy = append(refBy, reg.st.referencedBy(subject, v.version)...)
	}
	reg.mu.RUnlock()
	if mode == modeReadOnly {
		return nil, errNotPermitted("Subject %s is in read-only mode", subject)
	}
	if len(all) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	if len(refBy) > 0 {
		return nil, errf(http.StatusUnprocessableEntity, codeReferenceExists,
			"One or more references exist to the subject %s: ids %v", subject, refBy)
	}
	var recs []record
	var out []int
	if permanent {
		if len(live) > 0 {
			return nil, errf(http.StatusNotFound, codeSubjectNotSoftDeleted,
				"Subject '%s' was not deleted first before being permanently deleted", subject)
		}
		for _, v := range all {
			recs = append(recs, record{key: schemaKey(subject, v.version)})
			out = append(out, v.version)
		}
		recs = append(recs, record{key: subjectKey(keyConfig, subject)}, record{key: subjectKey(keyMode, subject)})
	} else {
		if len(live) == 0 {
			return nil, errf(http.StatusNotFound, codeSubjectSoftDeleted,
				"Subject '%s' was soft deleted.Set permanent=true to delete permanently", subject)
		}
		for _, v := range live {
			sv := schemaValue{Subject: subject, Version: v.version, ID: v.id, References: v.refs, Schema: v.schema, Deleted: true}
			if v.typ != typeAvro {
				sv.SchemaType = v.typ
			}
			recs = append(recs, record{key: schemaKey(subject, v.version), value: sv})
			out = append(out, v.version)
		}
		recs = append(recs, record{key: subjectKey(keyDeleteSubject, subject),
			value: deleteSubjectValue{Subject: subject, Version: live[len(live)-1].version}})
	}
	if err := reg.write(r.Context(), recs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (reg *Registry) listSchemas(w http.ResponseWriter, r *http.Request) (any, error) {
	deleted := boolParam(r, "deleted")
	latestOnly := boolParam(r, "latestOnly")
	prefix := r.URL.Query().Get("subjectPrefix")
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	out := []subjectResponse{}
	for _, s := range reg.st.subjectNames(deleted) {
		if !strings.HasPrefix(s, prefix) || !reg.may(r, kmsg.ACLOperationRead, s) {
			continue
		}
		vs := reg.st.versions(s, deleted)
		if latestOnly && len(vs) > 0 {
			vs = vs[len(vs)-1:]
		}
		for _, v := range vs {
			out = append(out, showVersion(v))
		}
	}
	return out, nil
}

// idLocked returns the schema an id names, if the user may read a
// subject that uses it (or subject, when given).
func (reg *Registry) idLocked(r *http.Request) (int, *idSchema, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 {
		return 0, nil, errf(http.StatusNotFound, codeSchemaNotFound, "Schema %s not found", r.PathValue("id"))
	}
	is := reg.st.ids[id]
	if is == nil {
		return id, nil, errSchemaIDNotFound(id)
	}
	if !reg.aclOn() {
		return id, is, nil
	}
	for _, sv := range reg.usesLocked(id, true) {
		if reg.may(r, kmsg.ACLOperationRead, sv.Subject) {
			return id, is, nil
		}
	}
	return id, nil, reg.forbidden(r, kmsg.ACLOperationRead, fmt.Sprintf("the subjects of schema %d", id))
}

type subjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

func (reg *Registry) usesLocked(id int, deleted bool) []subjectVersion {
	var out []subjectVersion
	for _, s := range reg.st.subjectNames(true) {
		for _, v := range reg.st.versions(s, deleted) {
			if v.id == id {
				out = append(out, subjectVersion{s, v.version})
			}
		}
	}
	return out
}

func (reg *Registry) schemaByID(w http.ResponseWriter, r *http.Request) (any, error) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	_, is, err := reg.idLocked(r)
	if err != nil {
		return nil, err
	}
	out := struct {
		SchemaType string      `json:"schemaType,omitempty"`
		References []Reference `json:"references,omitempty"`
		Schema     string      `json:"schema"`
	}{References: is.refs, Schema: is.schema}
	if is.typ != typeAvro {
		out.SchemaType = is.typ
	}
	return out, nil
}

func (reg *Registry) rawSchemaByID(w http.ResponseWriter, r *http.Request) (any, error) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	_, is, err := reg.idLocked(r)
	if err != nil {
		return nil, err
	}
	return rawString(is.schema), nil
}

func (reg *Registry) subjectsByID(w http.ResponseWriter, r *http.Request) (any, error) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	id, _, err := reg.idLocked(r)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, sv := range reg.usesLocked(id, boolParam(r, "deleted")) {
		if !slices.Contains(out, sv.Subject) && reg.may(r, kmsg.ACLOperationDescribe, sv.Subject) {
			out = append(out, sv.Subject)
		}
	}
	return out, nil
}

func (reg *Registry) versionsByID(w http.ResponseWriter, r *http.Request) (any, error) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	id, _, err := reg.idLocked(r)
	if err != nil {
		return nil, err
	}
	out := []subjectVersion{}
	for _, sv := range reg.usesLocked(id, boolParam(r, "deleted")) {
		if reg.may(r, kmsg.ACLOperationDescribe, sv.Subject) {
			out = append(out, sv)
		}
	}
	return out, nil
}

// configNeed checks the ACL a config or mode request needs: on the
// subject, or on the cluster for the global one.
func (reg *Registry) configNeed(r *http.Request, op kmsg.ACLOperation) error {
	if s := r.PathValue("subject"); s != "" {
		return reg.need(r, op, s)
	}
	return reg.needCluster(r, op)
}

func (reg *Registry) getConfig(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := reg.configNeed(r, kmsg.ACLOperationDescribeConfigs); err != nil {
		return nil, err
	}
	subject := r.PathValue("subject")
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	if subject != "" {
		c, ok := reg.st.subjConfig[subject]
		if !ok && !boolParam(r, "defaultToGlobal") {
			return nil, errf(http.StatusNotFound, codeSubjectCompatNotSet, "Subject '%s' does not have subject-level compatibility configured", subject)
		}
		if ok {
			return map[string]string{"compatibilityLevel": c}, nil
		}
	}
	return map[string]string{"compatibilityLevel": reg.st.compatibility("")}, nil
}

func (reg *Registry) putConfig(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := reg.configNeed(r, kmsg.ACLOperationAlterConfigs); err != nil {
		return nil, err
	}
	subject := r.PathValue("subject")
	var req struct {
		Compatibility string `json:"compatibility"`
	}
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	level, ok := validLevel(req.Compatibility)
	if !ok {
		return nil, errInvalidCompatibility()
	}
	if err := reg.lockWrite(r.Context()); err != nil {
		return nil, err
	}
	defer reg.wmu.Unlock()
	if err := reg.write(r.Context(), record{key: subjectKey(keyConfig, subject), value: configValue{level}}); err != nil {
		return nil, err
	}
	return map[string]string{"compatibility": level}, nil
}

func (reg *Registry) deleteConfig(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := reg.configNeed(r, kmsg.ACLOperationAlterConfigs); err != nil {
		return nil, err
	}
	subject := r.PathValue("subject")
	if err := reg.lockWrite(r.Context()); err != nil {
		return nil, err
	}
	defer reg.wmu.Unlock()
	reg.mu.RLock()
	old := reg.st.compatibility(subject)
	_, set := reg.st.subjConfig[subject]
	exists := len(reg.st.subjects[subject]) > 0
	reg.mu.RUnlock()
	if subject != "" && !set && !exists {
		return nil, errSubjectNotFound(subject)
	}
	if err := reg.write(r.Context(), record{key: subjectKey(keyConfig, subject)}); err != nil {
		return nil, err
	}
	return map[string]string{"compatibilityLevel": old}, nil
}

func (reg *Registry) getMode(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := reg.configNeed(r, kmsg.ACLOperationDescribeConfigs); err != nil {
		return nil, err
	}
	subject := r.PathValue("subject")
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	if subject != "" {
		m, ok := reg.st.subjMode[subject]
		if !ok && !boolParam(r, "defaultToGlobal") {
			return nil, errf(http.StatusNotFound, codeSubjectModeNotSet, "Subject '%s' does not have subject-level mode configured", subject)
		}
		if ok {
			return map[string]string{"mode": m}, nil
		}
	}
	return map[string]string{"mode": reg.st.modeOf("")}, nil
}

func (reg *Registry) putMode(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := reg.configNeed(r, kmsg.ACLOperationAlterConfigs); err != nil {
		return nil, err
	}
	subject := r.PathValue("subject")
	var req struct {
		Mode string `json:"mode"`
	}
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	mode, ok := validMode(req.Mode)
	if !ok {
		return nil, errInvalidMode(req.Mode)
	}
	if err := reg.lockWrite(r.Context()); err != nil {
		return nil, err
	}
	defer reg.wmu.Unlock()
	if mode == modeImport && !boolParam(r, "force") {
		reg.mu.RLock()
		var has bool
		if subject == "" {
			has = len(reg.st.subjects) > 0
		} else {
			has = len(reg.st.subjects[subject]) > 0
		}
		reg.mu.RUnlock()
		if has {
			return nil, errNotPermitted("Cannot import since found existing subjects")
		}
	}
	if err := reg.write(r.Context(), record{key: subjectKey(keyMode, subject), value: modeValue{mode}}); err != nil {
		return nil, err
	}
	return map[string]string{"mode": mode}, nil
}

func (reg *Registry) deleteMode(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := reg.configNeed(r, kmsg.ACLOperationAlterConfigs); err != nil {
		return nil, err
	}
	subject := r.PathValue("subject")
	if err := reg.lockWrite(r.Context()); err != nil {
		return nil, err
	}
	defer reg.wmu.Unlock()
	reg.mu.RLock()
	old := reg.st.modeOf(subject)
	_, set := reg.st.subjMode[subject]
	exists := len(reg.st.subjects[subject]) > 0
	reg.mu.RUnlock()
	if subject != "" && !set && !exists {
		return nil, errSubjectNotFound(subject)
	}
	if err := reg.write(r.Context(), record{key: subjectKey(keyMode, subject)}); err != nil {
		return nil, err
	}
	return map[string]string{"mode": old}, nil
}

func (reg *Registry) checkCompat(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationRead, subject); err != nil {
		return nil, err
	}
	var req schemaRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	p, _, err := reg.parseRequestLocked(&req)
	if err != nil {
		return nil, err
	}
	level := reg.st.compatibility(subject)
	var against []*version
	if vs := r.PathValue("version"); vs != "" {
		v, err := reg.findVersionLocked(subject, vs, false)
		if err != nil {
			return nil, err
		}
		against = []*version{v}
		// One version named: the level's direction, without transitivity.
		level = strings.TrimSuffix(level, "_TRANSITIVE")
	} else {
		against = reg.st.versions(subject, false)
	}
	var prev []parsed
	var msgs []string
	for _, v := range against {
		if normType(v.typ) != req.SchemaType {
			msgs = append(msgs, fmt.Sprintf("version %d is of type %s, the new schema of type %s", v.version, v.typ, req.SchemaType))
			continue
		}
		po, err := reg.parseVersionLocked(v)
		if err != nil {
			return nil, errf(http.StatusInternalServerError, codeInternal, "version %d does not parse: %v", v.version, err)
		}
		prev = append(prev, po)
	}
	msgs = append(msgs, checkCompatibility(level, p, prev)...)
	if !boolParam(r, "verbose") {
		return map[string]bool{"is_compatible": len(msgs) == 0}, nil
	}
	if msgs == nil {
		msgs = []string{}
	}
	return struct {
		IsCompatible bool     `json:"is_compatible"`
		Messages     []string `json:"messages"`
	}{len(msgs) == 0, msgs}, nil
}
