//go:build tools

// Package tools pins modules that tests and benchmarks use before code imports them.
package tools

import (
	_ "github.com/IBM/sarama"
	_ "github.com/golang/snappy"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/segmentio/kafka-go"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sys/unix"
)
