package partition

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is an error carrying a Kafka error code: errors.Is(err, code)
// holds, and the broker answers with the code and Msg.
type Error struct {
	Code *kerr.Error
	Msg  string
}

func (e *Error) Error() string { return e.Code.Message + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Code }

func errCode(code *kerr.Error, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// codeErr is errCode for a numeric Kafka error code.
func codeErr(code int16, format string, args ...any) error {
	ke, ok := kerr.ErrorForCode(code).(*kerr.Error)
	if !ok {
		ke = kerr.UnknownServerError
	}
	return errCode(ke, format, args...)
}
