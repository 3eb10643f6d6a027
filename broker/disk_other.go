//go:build !unix

package broker

import "errors"

func diskSpace(string) (total, free uint64, err error) {
	return 0, 0, errors.New("disk space is not reported on this platform")
}
