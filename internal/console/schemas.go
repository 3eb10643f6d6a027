package console

// Schema registry pages: with Config.Schemas set, the console lists the
// registry's subjects, their versions, schema texts and compatibility
// levels (web/app.js calls the registry's own REST API, mounted under
// /api/v1/registry/, so its login and subject ACLs apply as to any
// client), and the message browser decodes keys and values in the
// registry's wire format with their schema.
//
// A decoded value is shown only to a user who may READ a subject whose
// versions use the schema (the registry's rule for GET /schemas/ids/N);
// others get the raw bytes, as without a registry.

import (
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// decoder returns the record decoder for the request's user; nil
// without a registry.
func (s *Server) decoder(r *http.Request) func([]byte) *schemaregistry.Decoded {
	reg := s.cfg.Schemas
	if reg == nil {
		return nil
	}
	return func(b []byte) *schemaregistry.Decoded {
		d := reg.Decode(b)
		if d == nil || !s.maySchema(r, d.Subjects) {
			return nil
		}
		if len(d.JSON) > maxValueBytes {
			d.JSON, d.Error = nil, "the decoded value is larger than the browser shows (16 KiB)"
		}
		return d
	}
}

// maySchema reports whether the user may READ one of subjects.
func (s *Server) maySchema(r *http.Request, subjects []string) bool {
	if !s.b.AuthorizationEnabled() {
		return true
	}
	for _, subj := range subjects {
		if s.may(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, schemaregistry.SubjectACLPrefix+subj) {
			return true
		}
	}
	return false
}
