package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// shareAcks are consume --ack's values.
var shareAcks = map[string]kgo.AckStatus{"accept": kgo.AckAccept, "release": kgo.AckRelease, "reject": kgo.AckReject}

// parseShareAck checks consume's --share-group companions and returns
// the acknowledgement to send for each printed record.
func parseShareAck(ack string, partitions, group string, exit bool) (kgo.AckStatus, error) {
	st, ok := shareAcks[ack]
	switch {
	case !ok:
		return 0, usagef("consume: --ack %q: want accept, release or reject", ack)
	case partitions != "" || group != "" || exit:
		return 0, usagef("consume: --share-group does not go with -p, -G or -e: a share group hands out records, not partitions, and a queue has no end")
	}
	return st, nil
}

// runShare consumes as a member of share group group: every printed
// record is acknowledged with ack, and the acknowledgement is answered
// before the next poll.
func (k *consumer) runShare(group string, ack kgo.AckStatus) error {
	ctx := k.cmd.Context()
	if _, err := topicDetail(k.c, k.cmd, "consume", k.topic); err != nil {
		return err
	}
	var (
		ackMu  sync.Mutex // guards ackErr: the callback runs on kgo's goroutines
		ackErr error
	)
	cl, err := kgo.NewClient(append(k.c.cl.Opts(), kgo.ShareGroup(group), kgo.ConsumeTopics(k.topic),
		kgo.FetchMaxWait(min(k.c.timeout/2, 5*time.Second)),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			if err := rs.Error(); err != nil {
				ackMu.Lock()
				ackErr = cmp.Or(ackErr, err)
				ackMu.Unlock()
			}
		}))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := bufio.NewWriter(k.cmd.OutOrStdout())
	defer w.Flush()
	printed := 0
	for k.count == 0 || printed < k.count {
		pctx, cancel := context.WithTimeout(ctx, k.c.timeout)
		fetches, timedOut := k.pollSome(cl, pctx, cancel, printed)
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err := firstFetchError(fetches, func(t string, p int32, err error) error {
			return fmt.Errorf("consume %s/%d (share group %s): %w", t, p, group, err)
		}); err != nil {
			return err
		}
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			k.out.write(w, r)
			r.Ack(ack)
			n++
		})
		printed += n
		if err := w.Flush(); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		if n > 0 {
			sctx, cancel := k.c.step(ctx)
			err := cl.FlushAcks(sctx)
			cancel()
			ackMu.Lock()
			err = cmp.Or(err, ackErr)
			ackMu.Unlock()
			if err != nil {
				return k.c.wrap("consume: acknowledge to share group "+group, err)
			}
		}
		if timedOut && n == 0 && k.count > 0 {
			return fmt.Errorf("consume: no records for share group %s within %v (--timeout); %d of %d printed", group, k.c.timeout, printed, k.count)
		}
	}
	return nil
}

// shareAckNames lists --ack's values for its help.
func shareAckNames() string { return strings.Join([]string{"accept", "release", "reject"}, ", ") }
