package main

import (
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicedb/sluice/broker"
)

// serveGroups holds serve's consumer-group (KIP-848) flags.
type serveGroups struct {
	session, minSession, maxSession time.Duration
	heartbeat, minHB, maxHB         time.Duration
	assignors                       []string
	maxSize                         int
	migration                       string
}

// Kafka's defaults, shown in --help; a flag left at its default is not
// passed on, so DescribeConfigs reports it as Kafka's default.
var defaultServeGroups = serveGroups{
	session: 45 * time.Second, minSession: 45 * time.Second, maxSession: 60 * time.Second,
	heartbeat: 5 * time.Second, minHB: 5 * time.Second, maxHB: 15 * time.Second,
	assignors: []string{"uniform", "range"},
	migration: "bidirectional",
}

func groupFlags(fs *pflag.FlagSet) *serveGroups {
	g := &serveGroups{}
	d := defaultServeGroups
	fs.DurationVar(&g.session, "group-consumer-session-timeout", d.session, "session timeout of consumer-protocol (KIP-848) group members (group.consumer.session.timeout.ms); a group's consumer.session.timeout.ms overrides it")
	fs.DurationVar(&g.minSession, "group-consumer-min-session-timeout", d.minSession, "smallest session timeout a consumer group may set (group.consumer.min.session.timeout.ms)")
	fs.DurationVar(&g.maxSession, "group-consumer-max-session-timeout", d.maxSession, "largest session timeout a consumer group may set (group.consumer.max.session.timeout.ms)")
	fs.DurationVar(&g.heartbeat, "group-consumer-heartbeat-interval", d.heartbeat, "heartbeat interval given to consumer-protocol group members (group.consumer.heartbeat.interval.ms), shorter than the session timeout; a group's consumer.heartbeat.interval.ms overrides it")
	fs.DurationVar(&g.minHB, "group-consumer-min-heartbeat-interval", d.minHB, "smallest heartbeat interval a consumer group may set (group.consumer.min.heartbeat.interval.ms)")
	fs.DurationVar(&g.maxHB, "group-consumer-max-heartbeat-interval", d.maxHB, "largest heartbeat interval a consumer group may set (group.consumer.max.heartbeat.interval.ms)")
	fs.StringSliceVar(&g.assignors, "group-consumer-assignors", d.assignors, "server-side assignors consumer groups may ask for, the first the default (group.consumer.assignors): uniform, range")
	fs.IntVar(&g.maxSize, "group-consumer-max-size", 0, "most members of one consumer group (group.consumer.max.size); 0: unbounded")
	fs.StringVar(&g.migration, "group-consumer-migration-policy", d.migration, "whether groups with members convert between the classic and the consumer protocol (group.consumer.migration.policy): bidirectional, upgrade, downgrade or disabled")
	return g
}

// opt is the broker option for the flags; values left at Kafka's
// defaults are passed as zero. Values outside their bounds are a usage
// error naming Kafka's config.
func (g *serveGroups) opt() (broker.Opt, error) {
	d := defaultServeGroups
	pick := func(v, def time.Duration) time.Duration {
		if v == def {
			return 0
		}
		return v
	}
	s := broker.ConsumerGroupSettings{
		SessionTimeout:       pick(g.session, d.session),
		MinSessionTimeout:    pick(g.minSession, d.minSession),
		MaxSessionTimeout:    pick(g.maxSession, d.maxSession),
		HeartbeatInterval:    pick(g.heartbeat, d.heartbeat),
		MinHeartbeatInterval: pick(g.minHB, d.minHB),
		MaxHeartbeatInterval: pick(g.maxHB, d.maxHB),
		MaxSize:              g.maxSize,
	}
	if g.migration != d.migration {
		s.MigrationPolicy = g.migration
	}
	if !slices.Equal(g.assignors, d.assignors) {
		s.Assignors = g.assignors
	}
	if err := s.Validate(); err != nil {
		return nil, usagef("serve: %v (see --group-consumer-* in sluice serve --help)", strings.TrimPrefix(err.Error(), "groups: "))
	}
	return broker.ConsumerGroups(s), nil
}
