package txn

// Live reports whether the coordinator holds live state for producer
// pid's transaction: the id it belongs to has an Ongoing transaction (on
// any partitions: an implicit add may not be recorded yet) or one being
// completed (PrepareCommit, PrepareAbort) at pid. A partition whose
// transaction of pid is open with no live state is hanging: nothing will
// ever write its marker (see partition.Partition.AbortHanging).
func (c *Coordinator) Live(pid int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byPID[pid]
	if e == nil || e.t == nil || e.t.PID != pid {
		return false
	}
	switch e.t.State {
	case Ongoing, PrepareCommit, PrepareAbort:
		return true
	}
	return false
}
