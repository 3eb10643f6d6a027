package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestParseShareAck: --ack names an acknowledgement; --share-group does
// not go with partition, group or end-offset flags.
func TestParseShareAck(t *testing.T) {
	for _, tc := range []struct {
		ack, parts, group string
		exit              bool
		want              kgo.AckStatus
		err               string
	}{
		{ack: "accept", want: kgo.AckAccept},
		{ack: "release", want: kgo.AckRelease},
		{ack: "reject", want: kgo.AckReject},
		{ack: "ignore", err: "want accept, release or reject"},
		{ack: "accept", parts: "0", err: "does not go with -p, -G or -e"},
		{ack: "accept", group: "g", err: "does not go with -p, -G or -e"},
		{ack: "accept", exit: true, err: "does not go with -p, -G or -e"},
	} {
		got, err := parseShareAck(tc.ack, tc.parts, tc.group, tc.exit)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: error %v, want one saying %q", tc, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: %v %v", tc, got, err)
		}
	}
}
