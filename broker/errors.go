package broker

// Errors that carry a Kafka error code to the response.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// codeError is an error carrying a Kafka error code.
type codeError struct {
	code *kerr.Error
	msg  string
}

func (e *codeError) Error() string { return e.code.Message + ": " + e.msg }
func (e *codeError) Unwrap() error { return e.code }

func errCode(code *kerr.Error, format string, args ...any) error {
	return &codeError{code: code, msg: fmt.Sprintf(format, args...)}
}

// codeOf returns the Kafka error code of err (0 for nil, UNKNOWN_SERVER_ERROR
// for an error without one).
func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
