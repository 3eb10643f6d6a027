package schemaregistry

import (
	"fmt"
	"strings"
)

// Compatibility levels and modes.
const (
	levelNone               = "NONE"
	levelBackward           = "BACKWARD"
	levelBackwardTransitive = "BACKWARD_TRANSITIVE"
	levelForward            = "FORWARD"
	levelForwardTransitive  = "FORWARD_TRANSITIVE"
	levelFull               = "FULL"
	levelFullTransitive     = "FULL_TRANSITIVE"

	defaultCompatibility = levelBackward

	modeReadWrite = "READWRITE"
	modeReadOnly  = "READONLY"
	modeImport    = "IMPORT"
)

// validLevel returns the level in capitals, or ok false.
func validLevel(l string) (string, bool) {
	l = strings.ToUpper(l)
	switch l {
	case levelNone, levelBackward, levelBackwardTransitive, levelForward, levelForwardTransitive, levelFull, levelFullTransitive:
		return l, true
	}
	return "", false
}

func validMode(m string) (string, bool) {
	m = strings.ToUpper(m)
	switch m {
	case modeReadWrite, modeReadOnly, modeImport:
		return m, true
	}
	return "", false
}

// checkCompatibility reports why schema s may not follow the existing
// versions prev (oldest first) under level: the rules of Confluent's
// registry. BACKWARD: s reads data written with the latest version;
// FORWARD: the latest reads data written with s; FULL: both; the
// _TRANSITIVE levels check every version, not only the latest.
func checkCompatibility(level string, s parsed, prev []parsed) []string {
	if level == levelNone || len(prev) == 0 {
		return nil
	}
	transitive := strings.HasSuffix(level, "_TRANSITIVE")
	base := strings.TrimSuffix(level, "_TRANSITIVE")
	against := prev[len(prev)-1:]
	if transitive {
		against = prev
	}
	var msgs []string
	for i := len(against) - 1; i >= 0; i-- {
		old := against[i]
		if base == levelBackward || base == levelFull {
			for _, m := range s.canRead(old) {
				msgs = append(msgs, fmt.Sprintf("new schema cannot read data written with an earlier one: %s", m))
			}
		}
		if base == levelForward || base == levelFull {
			for _, m := range old.canRead(s) {
				msgs = append(msgs, fmt.Sprintf("an earlier schema cannot read data written with the new one: %s", m))
			}
		}
	}
	return msgs
}
