package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestServeConsumerGroupFlags: the --group-consumer-* flags (and their
// environment variables) reach the broker, which reports them as static
// broker configs and gives them to consumer groups as their defaults.
func TestServeConsumerGroupFlags(t *testing.T) {
	addr := freeAddr(t)
	cmd, stderr := startServeArgs(t, addr, []string{"SLUICE_GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL=20s"},
		"serve", "--data", t.TempDir(), "--listen", addr, "--group-consumer-heartbeat-interval", "8s")
	defer stopServe(t, cmd, stderr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Resources = []kmsg.DescribeConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0", ConfigNames: []string{
			"group.consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", "group.consumer.session.timeout.ms"}},
		{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g"},
	}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("resource %s: error %d", r.ResourceName, r.ErrorCode)
		}
		for _, c := range r.Configs {
			got[r.ResourceName+"/"+c.Name] = *c.Value + " " + c.Source.String()
		}
	}
	for k, want := range map[string]string{
		"0/group.consumer.heartbeat.interval.ms":     "8000 STATIC_BROKER_CONFIG",
		"0/group.consumer.max.heartbeat.interval.ms": "20000 STATIC_BROKER_CONFIG",
		"0/group.consumer.session.timeout.ms":        "45000 DEFAULT_CONFIG",
		"g/consumer.heartbeat.interval.ms":           "8000 STATIC_BROKER_CONFIG",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}

// TestServeRejectsBadConsumerGroupFlags: values outside Kafka's bounds
// are a usage error naming the config.
func TestServeRejectsBadConsumerGroupFlags(t *testing.T) {
	for args, want := range map[string]string{
		"serve --group-consumer-heartbeat-interval 20s":    "group.consumer.heartbeat.interval.ms 20s is outside [5s, 15s]",
		"serve --group-consumer-session-timeout 5s":        "group.consumer.session.timeout.ms 5s is outside [45s, 1m0s]",
		"serve --group-consumer-assignors sticky":          `unknown assignor "sticky"`,
		"serve --group-consumer-max-size -1":               "group.consumer.max.size -1 is negative",
		"serve --group-consumer-migration-policy sideways": `group.consumer.migration.policy "sideways": want bidirectional, upgrade, downgrade or disabled`,
		"serve --group-consumer-min-session-timeout 10s --group-consumer-session-timeout 10s --group-consumer-heartbeat-interval 10s": "must be shorter than group.consumer.session.timeout.ms",
	} {
		cmd := sluiceCmd(strings.Fields(args)...)
		cmd.Env = append(cmd.Env, "SLUICE_DATA="+t.TempDir(), "SLUICE_LISTEN="+freeAddr(t), "SLUICE_HTTP=", "SLUICE_SCHEMA_REGISTRY=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s: exited with %v, want exit code 2 (bad usage)\n%s", args, err, out)
			continue
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: output %q does not say %q", args, out, want)
		}
	}
}
