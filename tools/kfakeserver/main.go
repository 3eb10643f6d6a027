// Command kfakeserver runs franz-go's kfake broker in a process of its own,
// so that benchmarks can compare it with Sluice each in its own process
// and read each broker's CPU time from /proc.
//
//	go run ./tools/kfakeserver --port 9093                      # in memory
//	go run ./tools/kfakeserver --port 9093 --data-dir D --sync  # fsync per write
//	go run ./tools/kfakeserver --broker-config group.consumer.heartbeat.interval.ms=500
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 9093, "port to listen on (127.0.0.1)")
	dataDir := flag.String("data-dir", "", "persist to this directory (empty: in memory)")
	sync := flag.Bool("sync", false, "fsync every write (with --data-dir)")
	partitions := flag.Int("partitions", 1, "partitions of auto-created topics")
	var brokerConfigs []string
	flag.Func("broker-config", "a broker config key=value, such as group.consumer.heartbeat.interval.ms=500 (repeatable)", func(kv string) error {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("want key=value")
		}
		brokerConfigs = append(brokerConfigs, kv)
		return nil
	})
	flag.Parse()

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(*port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
	}
	if len(brokerConfigs) > 0 {
		m := map[string]string{}
		for _, kv := range brokerConfigs {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		opts = append(opts, kfake.BrokerConfigs(m))
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
		if *sync {
			opts = append(opts, kfake.SyncWrites())
		}
	} else if *sync {
		fmt.Fprintln(os.Stderr, "kfakeserver: --sync needs --data-dir")
		os.Exit(2)
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakeserver:", err)
		os.Exit(1)
	}
	fmt.Println("kfake listening on", c.ListenAddrs()[0])
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
}
