package broker

// AlterReplicaLogDirs v1-2.
//
// Behaviour:
//   - Sluice has one log directory, the data directory, as DescribeLogDirs
//     reports it (absolute). Asking to move a partition there succeeds at
//     once: every partition already lives in it.
//   - Any other path gets LOG_DIR_NOT_FOUND on each of its partitions, as
//     Kafka answers a directory that is not one of its log.dirs.
//   - A partition that does not exist gets REPLICA_NOT_AVAILABLE, as
//     Kafka answers a partition it does not host.
//   - Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED on
//     every partition). v0 is not served (Kafka 4 removed it, KIP-896).

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterReplicaLogDirs.Int16(), 1, 2, handleAlterReplicaLogDirs) }

func handleAlterReplicaLogDirs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	allowed := r.allowedCluster(opAlter)
	ours := r.b.logDir()
	for _, d := range req.Dirs {
		same := false
		if abs, err := filepath.Abs(d.Dir); err == nil && filepath.Clean(abs) == ours {
			same = true
		}
		for _, rt := range d.Topics {
			st := kmsg.NewAlterReplicaLogDirsResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				sp.Partition = p
				switch {
				case !allowed:
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case !same:
					sp.ErrorCode = kerr.LogDirNotFound.Code
				case !r.b.partitionExists(rt.Topic, p):
					sp.ErrorCode = kerr.ReplicaNotAvailable.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
	return resp, nil
}

// logDir is the broker's one log directory as DescribeLogDirs names it:
// the data directory, absolute and clean.
func (b *Broker) logDir() string {
	dir := b.cfg.dataDir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Clean(dir)
}
