package broker

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errMessage is the text of a response's ErrorMessage for err: what went
// wrong, without the error code's name, which the response carries in
// its ErrorCode and clients print beside the message (Kafka's messages
// do not repeat it either). A codeError gives its message; an error
// wrapping one gives its own text with every "CODE_NAME: " prefix of the
// code removed.
func errMessage(err error) string {
	var ce *codeError
	if errors.As(err, &ce) {
		if ce == err {
			return ce.msg
		}
		return strings.ReplaceAll(err.Error(), ce.code.Message+": ", "")
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return strings.ReplaceAll(err.Error(), ke.Message+": ", "")
	}
	return err.Error()
}
