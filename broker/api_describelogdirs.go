package broker

// DescribeLogDirs v0-4.
//
// Behaviour:
//   - One log directory: the data directory (absolute path). Each
//     partition's Size is the bytes of its segment files (whole batches;
//     indexes excluded, as Kafka counts them), OffsetLag 0 and
//     IsFuture false.
//   - Topics null describes every partition; named topics that do not
//     exist are left out, as Kafka does.
//   - v4 TotalBytes and UsableBytes come from the filesystem holding the
//     data directory (-1 when it cannot be read).
//   - Authorization: DESCRIBE on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED, v3+; older versions get no
//     directories).

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeLogDirs.Int16(), 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !r.allowedCluster(opDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code // v3+; older versions see no directories
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = r.b.cfg.dataDir
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	dir.TotalBytes, dir.UsableBytes = diskSpace(dir.Dir)

	addTopic := func(t *topic, parts []int32) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.name
		for _, i := range parts {
			if i < 0 || int(i) >= len(t.parts) {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition = i
			dp.Size = t.parts[i].Log().Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		dir.Topics = append(dir.Topics, dt)
	}
	if req.Topics == nil {
		for _, t := range r.b.sortedTopics() {
			all := make([]int32, len(t.parts))
			for i := range all {
				all[i] = int32(i)
			}
			addTopic(t, all)
		}
	} else {
		for _, rt := range req.Topics {
			if t := r.b.lookup(rt.Topic); t != nil {
				addTopic(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}
