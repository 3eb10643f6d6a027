package schemaregistry

import (
	"fmt"
	"net/http"
)

// Error codes of the REST API: Confluent's, so that clients that switch
// on them (franz-go's sr, the Confluent serializers) behave the same.
const (
	codeSubjectNotFound       = 40401
	codeVersionNotFound       = 40402
	codeSchemaNotFound        = 40403
	codeSubjectSoftDeleted    = 40404
	codeSubjectNotSoftDeleted = 40405
	codeVersionSoftDeleted    = 40406
	codeVersionNotSoftDeleted = 40407
	codeSubjectCompatNotSet   = 40408
	codeSubjectModeNotSet     = 40409
	codeIncompatible          = 409
	codeInvalidSchema         = 42201
	codeInvalidVersion        = 42202
	codeInvalidCompatibility  = 42203
	codeInvalidMode           = 42204
	codeOperationNotPermitted = 42205
	codeReferenceExists       = 42206
	codeIDDoesNotMatch        = 42207
	codeInvalidSubject        = 42208
	codeStore                 = 50001
	codeUnauthorized          = 40101
	codeForbidden             = 40301
	codeBadRequest            = 400
	codeNotFound              = 404
	codeMethodNotAllowed      = 405
	codeUnsupportedMediaType  = 415
	codeUnprocessable         = 422
	codeInternal              = 500
)

// apiError is an answer other than 200: its HTTP status and the body
// {"error_code": code, "message": msg}.
type apiError struct {
	status int
	code   int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %d: %s", e.status, e.code, e.msg) }

func errf(status, code int, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(s string) *apiError {
	return errf(http.StatusNotFound, codeSubjectNotFound, "Subject '%s' not found.", s)
}

func errVersionNotFound(v int) *apiError {
	return errf(http.StatusNotFound, codeVersionNotFound, "Version %d not found.", v)
}

func errSchemaNotFound() *apiError {
	return errf(http.StatusNotFound, codeSchemaNotFound, "Schema not found")
}

func errSchemaIDNotFound(id int) *apiError {
	return errf(http.StatusNotFound, codeSchemaNotFound, "Schema %d not found", id)
}

func errInvalidSchema(err error) *apiError {
	return errf(http.StatusUnprocessableEntity, codeInvalidSchema, "Invalid schema: %v", err)
}

func errInvalidVersion(v string) *apiError {
	return errf(http.StatusUnprocessableEntity, codeInvalidVersion,
		"The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v)
}

func errInvalidCompatibility() *apiError {
	return errf(http.StatusUnprocessableEntity, codeInvalidCompatibility,
		"Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
}

func errInvalidMode(m string) *apiError {
	return errf(http.StatusUnprocessableEntity, codeInvalidMode,
		"Invalid mode %q. Valid values are READWRITE, READONLY and IMPORT", m)
}

func errNotPermitted(format string, args ...any) *apiError {
	return errf(http.StatusUnprocessableEntity, codeOperationNotPermitted, format, args...)
}

func errStore(err error) *apiError {
	return errf(http.StatusInternalServerError, codeStore, "Error while writing to the _schemas topic: %v", err)
}
