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
	h("GET /subjects/{subject}/versions/{version}", reg.readVersion(false, showVersionLocked))
	h("GET /subjects/{subject}/versions/{version}/schema", reg.readVersion(false, rawVersionLocked))
	h("GET /subjects/{subject}/versions/{version}/referencedby", reg.readVersion(true, reg.referencedByLocked))
	h("DELETE /subjects/{subject}/versions/{version}", reg.deleteVersion)
	h("POST /subjects/{subject}", reg.lookup)
	h("DELETE /subjects/{subject}", reg.deleteSubject)
	h("GET /schemas", reg.listSchemas)
	h("GET /schemas/types", func(http.ResponseWriter, *http.Request) (any, error) {
		return []string{typeJSON, typeProtobuf, typeAvro}, nil
	})
	h("GET /schemas/ids/{id}", reg.readID(schemaByIDLocked))
	h("GET /schemas/ids/{id}/schema", reg.readID(rawSchemaByIDLocked))
	h("GET /schemas/ids/{id}/subjects", reg.readID(reg.subjectsByIDLocked))
	h("GET /schemas/ids/{id}/versions", reg.readID(reg.versionsByIDLocked))
	for _, path := range []string{"/config", "/config/{subject}"} {
		h("GET "+path, reg.getSetting(&configAPI))
		h("PUT "+path, reg.putSetting(&configAPI))
		h("DELETE "+path, reg.deleteSetting(&configAPI))
	}
	for _, path := range []string{"/mode", "/mode/{subject}"} {
		h("GET "+path, reg.getSetting(&modeAPI))
		h("PUT "+path, reg.putSetting(&modeAPI))
		h("DELETE "+path, reg.deleteSetting(&modeAPI))
	}
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

// readVersion is a GET of one version of the path's subject: READ on
// the subject, then show's answer for the version the path names
// (soft-deleted ones with ?deleted=true, or always with anyDeleted),
// under mu.
func (reg *Registry) readVersion(anyDeleted bool, show func(*version) any) handlerFunc {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		subject := r.PathValue("subject")
		if err := reg.need(r, kmsg.ACLOperationRead, subject); err != nil {
			return nil, err
		}
		reg.mu.RLock()
		defer reg.mu.RUnlock()
		v, err := reg.findVersionLocked(subject, r.PathValue("version"), anyDeleted || boolParam(r, "deleted"))
		if err != nil {
			return nil, err
		}
		return show(v), nil
	}
}

func showVersionLocked(v *version) any { return showVersion(v) }

func rawVersionLocked(v *version) any { return rawString(v.schema) }

func (reg *Registry) referencedByLocked(v *version) any {
	out := reg.st.referencedBy(v.subject, v.version)
	if out == nil {
		out = []int{}
	}
	return out
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

// registeredLocked normalizes req's type and returns the version of
// subject (soft-deleted ones with deleted) that holds req's schema,
// found without a parse, or nil.
func (reg *Registry) registeredLocked(subject string, req *schemaRequest, deleted bool) *version {
	req.SchemaType = normType(strings.ToUpper(req.SchemaType))
	_, refs, err := reg.resolveLocked(req.References)
	if err != nil || req.Schema == "" {
		return nil
	}
	return reg.matchLocked(subject, req.SchemaType, req.Schema, refs, deleted)
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
	var v *version
	err := reg.change(r.Context(), func() (recs []record, err error) {
		reg.mu.RLock()
		v, err = reg.prepareRegisterLocked(subject, &req, normalize)
		reg.mu.RUnlock()
		if err != nil || v.version == 0 { // version 0: already registered
			return nil, err
		}
		return []record{v.record(false)}, nil
	})
	if err != nil {
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
	if prev := reg.registeredLocked(subject, req, false); prev != nil && (req.ID <= 0 || req.ID == prev.id) {
		return &version{id: prev.id}, nil
	}
	typ := req.SchemaType
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

// change makes a change: under wmu (lockWrite), prepare checks it
// against the state and returns the records to write, which write
// writes and applies; with none, nothing is written.
func (reg *Registry) change(ctx context.Context, prepare func() ([]record, error)) error {
	if err := reg.lockWrite(ctx); err != nil {
		return err
	}
	defer reg.wmu.Unlock()
	recs, err := prepare()
	if err != nil || len(recs) == 0 {
		return err
	}
	return reg.write(ctx, recs...)
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

// readSchemaRequest checks READ on the path's subject and reads the
// body (lookup and compatibility checks).
func (reg *Registry) readSchemaRequest(r *http.Request) (string, *schemaRequest, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationRead, subject); err != nil {
		return "", nil, err
	}
	var req schemaRequest
	if err := decodeBody(r, &req); err != nil {
		return "", nil, err
	}
	return subject, &req, nil
}

func (reg *Registry) lookup(w http.ResponseWriter, r *http.Request) (any, error) {
	subject, req, err := reg.readSchemaRequest(r)
	if err != nil {
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
	if v := reg.registeredLocked(subject, req, deleted); v != nil {
		return showVersion(v), nil
	}
	if _, _, err := reg.parseRequestLocked(req); err != nil {
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
	var deleted int
	err := reg.change(r.Context(), func() ([]record, error) {
		v, err := reg.versionToDelete(subject, r.PathValue("version"), permanent)
		if err != nil {
			return nil, err
		}
		deleted = v.version
		if permanent {
			return []record{{key: schemaKey(subject, v.version)}}, nil
		}
		return []record{v.record(true)}, nil
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

// versionToDelete checks the delete of the version of subject that vs
// names (with permanent, a hard delete) and returns the version.
// Callers hold wmu.
func (reg *Registry) versionToDelete(subject, vs string, permanent bool) (*version, error) {
	reg.mu.RLock()
	if reg.st.modeOf(subject) == modeReadOnly {
		reg.mu.RUnlock()
		return nil, errNotPermitted("Subject %s is in read-only mode", subject)
	}
	// A number names a soft-deleted version too (to say so); latest is
	// the highest live one, or with permanent the highest.
	_, latest, _ := parseVersion(vs)
	v, err := reg.findVersionLocked(subject, vs, permanent || !latest)
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
	if permanent && !v.deleted {
		return nil, errf(http.StatusNotFound, codeVersionNotSoftDeleted,
			"Subject '%s' Version %d was not deleted first before being permanently deleted", subject, v.version)
	}
	return v, nil
}

func (reg *Registry) deleteSubject(w http.ResponseWriter, r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	if err := reg.need(r, kmsg.ACLOperationDelete, subject); err != nil {
		return nil, err
	}
	permanent := boolParam(r, "permanent")
	var out []int
	err := reg.change(r.Context(), func() (recs []record, err error) {
		recs, out, err = reg.subjectToDelete(subject, permanent)
		return recs, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// subjectToDelete checks the delete of subject (with permanent, a hard
// delete) and returns the records to write and the versions deleted.
// Callers hold wmu.
func (reg *Registry) subjectToDelete(subject string, permanent bool) ([]record, []int, error) {
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
		return nil, nil, errNotPermitted("Subject %s is in read-only mode", subject)
	}
	if len(all) == 0 {
		return nil, nil, errSubjectNotFound(subject)
	}
	if len(refBy) > 0 {
		return nil, nil, errf(http.StatusUnprocessableEntity, codeReferenceExists,
			"One or more references exist to the subject %s: ids %v", subject, refBy)
	}
	var recs []record
	var out []int
	if permanent {
		if len(live) > 0 {
			return nil, nil, errf(http.StatusNotFound, codeSubjectNotSoftDeleted,
				"Subject '%s' was not deleted first before being permanently deleted", subject)
		}
		for _, v := range all {
			recs = append(recs, record{key: schemaKey(subject, v.version)})
			out = append(out, v.version)
		}
		recs = append(recs, record{key: subjectKey(keyConfig, subject)}, record{key: subjectKey(keyMode, subject)})
	} else {
		if len(live) == 0 {
			return nil, nil, errf(http.StatusNotFound, codeSubjectSoftDeleted,
				"Subject '%s' was soft deleted.Set permanent=true to delete permanently", subject)
		}
		for _, v := range live {
			recs = append(recs, v.record(true))
			out = append(out, v.version)
		}
		recs = append(recs, record{key: subjectKey(keyDeleteSubject, subject),
			value: deleteSubjectValue{Subject: subject, Version: live[len(live)-1].version}})
	}
	return recs, out, nil
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

// readID is a GET of what the path's schema id names: show's answer,
// under mu, once the user may read a subject that uses the id
// (idLocked).
func (reg *Registry) readID(show func(r *http.Request, id int, is *idSchema) any) handlerFunc {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		reg.mu.RLock()
		defer reg.mu.RUnlock()
		id, is, err := reg.idLocked(r)
		if err != nil {
			return nil, err
		}
		return show(r, id, is), nil
	}
}

func schemaByIDLocked(_ *http.Request, _ int, is *idSchema) any {
	out := struct {
		SchemaType string      `json:"schemaType,omitempty"`
		References []Reference `json:"references,omitempty"`
		Schema     string      `json:"schema"`
	}{References: is.refs, Schema: is.schema}
	if is.typ != typeAvro {
		out.SchemaType = is.typ
	}
	return out
}

func rawSchemaByIDLocked(_ *http.Request, _ int, is *idSchema) any { return rawString(is.schema) }

func (reg *Registry) subjectsByIDLocked(r *http.Request, id int, _ *idSchema) any {
	out := []string{}
	for _, sv := range reg.usesLocked(id, boolParam(r, "deleted")) {
		if !slices.Contains(out, sv.Subject) && reg.may(r, kmsg.ACLOperationDescribe, sv.Subject) {
			out = append(out, sv.Subject)
		}
	}
	return out
}

func (reg *Registry) versionsByIDLocked(r *http.Request, id int, _ *idSchema) any {
	out := []subjectVersion{}
	for _, sv := range reg.usesLocked(id, boolParam(r, "deleted")) {
		if reg.may(r, kmsg.ACLOperationDescribe, sv.Subject) {
			out = append(out, sv)
		}
	}
	return out
}

// configNeed checks the ACL a config or mode request needs: on the
// subject, or on the cluster for the global one.
func (reg *Registry) configNeed(r *http.Request, op kmsg.ACLOperation) error {
	if s := r.PathValue("subject"); s != "" {
		return reg.need(r, op, s)
	}
	return reg.needCluster(r, op)
}

// settingAPI is what differs between /config (the compatibility level)
// and /mode, which get, set and delete a setting, global or of a
// subject, the same way.
type settingAPI struct {
	keyType string                              // of its records: keyConfig or keyMode
	name    string                              // its name in errors, and a PUT's body and answer field
	field   string                              // the field of GET and DELETE answers
	notSet  int                                 // the code of a GET of a subject without its own
	of      func(*state) *setting               // the setting in the state
	value   func(v string) any                  // a record's value
	parse   func(*http.Request) (string, error) // a PUT's body: the value, checked
	// check, when set, checks a PUT of v against the state; under wmu.
	check func(reg *Registry, r *http.Request, subject, v string) error
}

var configAPI = settingAPI{
	keyType: keyConfig, name: "compatibility", field: "compatibilityLevel", notSet: codeSubjectCompatNotSet,
	of:    func(s *state) *setting { return &s.config },
	value: func(v string) any { return configValue{v} },
	parse: parseSetting(func(b *configBody) string { return b.Compatibility }, validLevel,
		func(string) *apiError { return errInvalidCompatibility() }),
}

var modeAPI = settingAPI{
	keyType: keyMode, name: "mode", field: "mode", notSet: codeSubjectModeNotSet,
	of:    func(s *state) *setting { return &s.mode },
	value: func(v string) any { return modeValue{v} },
	parse: parseSetting(func(b *modeBody) string { return b.Mode }, validMode, errInvalidMode),
	check: (*Registry).checkImport,
}

// The bodies of PUT /config and PUT /mode. They are aliases of unnamed
// structs so that a decoding error's text names no type.
type (
	configBody = struct {
		Compatibility string `json:"compatibility"`
	}
	modeBody = struct {
		Mode string `json:"mode"`
	}
)

// parseSetting reads a PUT's body of type B, whose field gives the
// value, and checks the value with valid, or fails with invalid.
func parseSetting[B any](field func(*B) string, valid func(string) (string, bool), invalid func(string) *apiError) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		var body B
		if err := decodeBody(r, &body); err != nil {
			return "", err
		}
		v, ok := valid(field(&body))
		if !ok {
			return "", invalid(field(&body))
		}
		return v, nil
	}
}

// checkImport refuses IMPORT mode where subjects exist (globally: any),
// unless ?force=true.
func (reg *Registry) checkImport(r *http.Request, subject, mode string) error {
	if mode != modeImport || boolParam(r, "force") {
		return nil
	}
	reg.mu.RLock()
	var has bool
	if subject == "" {
		has = len(reg.st.subjects) > 0
	} else {
		has = len(reg.st.subjects[subject]) > 0
	}
	reg.mu.RUnlock()
	if has {
		return errNotPermitted("Cannot import since found existing subjects")
	}
	return nil
}

func (reg *Registry) getSetting(api *settingAPI) handlerFunc {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		if err := reg.configNeed(r, kmsg.ACLOperationDescribeConfigs); err != nil {
			return nil, err
		}
		subject := r.PathValue("subject")
		reg.mu.RLock()
		defer reg.mu.RUnlock()
		st := api.of(reg.st)
		if subject != "" {
			v, ok := st.own(subject)
			if !ok && !boolParam(r, "defaultToGlobal") {
				return nil, errf(http.StatusNotFound, api.notSet, "Subject '%s' does not have subject-level %s configured", subject, api.name)
			}
			if ok {
				return map[string]string{api.field: v}, nil
			}
		}
		return map[string]string{api.field: st.of("")}, nil
	}
}

func (reg *Registry) putSetting(api *settingAPI) handlerFunc {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		if err := reg.configNeed(r, kmsg.ACLOperationAlterConfigs); err != nil {
			return nil, err
		}
		subject := r.PathValue("subject")
		v, err := api.parse(r)
		if err != nil {
			return nil, err
		}
		err = reg.change(r.Context(), func() ([]record, error) {
			if api.check != nil {
				if err := api.check(reg, r, subject, v); err != nil {
					return nil, err
				}
			}
			return []record{{key: subjectKey(api.keyType, subject), value: api.value(v)}}, nil
		})
		if err != nil {
			return nil, err
		}
		return map[string]string{api.name: v}, nil
	}
}

func (reg *Registry) deleteSetting(api *settingAPI) handlerFunc {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		if err := reg.configNeed(r, kmsg.ACLOperationAlterConfigs); err != nil {
			return nil, err
		}
		subject := r.PathValue("subject")
		var old string
		err := reg.change(r.Context(), func() ([]record, error) {
			reg.mu.RLock()
			st := api.of(reg.st)
			old = st.of(subject)
			_, set := st.own(subject)
			exists := len(reg.st.subjects[subject]) > 0
			reg.mu.RUnlock()
			if subject != "" && !set && !exists {
				return nil, errSubjectNotFound(subject)
			}
			return []record{{key: subjectKey(api.keyType, subject)}}, nil
		})
		if err != nil {
			return nil, err
		}
		return map[string]string{api.field: old}, nil
	}
}

func (reg *Registry) checkCompat(w http.ResponseWriter, r *http.Request) (any, error) {
	subject, req, err := reg.readSchemaRequest(r)
	if err != nil {
		return nil, err
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	p, _, err := reg.parseRequestLocked(req)
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
