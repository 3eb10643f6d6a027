package groups

// API CONTRACT (the groups implementer replaces the bodies and may move
// these declarations into other files; the broker codes against Open,
// Close and the Config fields).

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/internal/vfs"
)

// Config sets up a coordinator. Zero values take the defaults noted.
type Config struct {
	FS               vfs.FS
	Dir              string        // directory of the coordinator's internal log
	NodeID           int32         // this broker's node id (the coordinator for every group)
	Host             string        // advertised host, for FindCoordinator
	Port             int32         // advertised port
	OffsetsRetention time.Duration // default 7 days (offsets.retention.minutes)
	Logger           *slog.Logger
	Registerer       prometheus.Registerer
	Now              func() time.Time
}

// Coordinator is the consumer-group coordinator for every group of a
// broker, with committed offsets persisted in an internal log.
type Coordinator struct{}

// Open replays the internal log and starts the coordinator.
func Open(cfg Config) (*Coordinator, error) { panic("unimplemented") }

// Close stops timers and goroutines and closes the internal log. Idempotent.
func (c *Coordinator) Close() error { panic("unimplemented") }
