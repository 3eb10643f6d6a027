package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroupNotFound turns g, a group the coordinator answered as Dead
// (it does not exist), into DescribeGroups v6's GROUP_ID_NOT_FOUND.
func describeGroupNotFound(g *kmsg.DescribeGroupsResponseGroup) {
	id := g.Group
	*g = kmsg.NewDescribeGroupsResponseGroup()
	g.Group = id
	g.ErrorCode = kerr.GroupIDNotFound.Code
	g.ErrorMessage = strPtr("group " + id + " does not exist")
}
