package storage

// SetConfig changes the limits of an open log (segment size and age,
// retention) without reopening it. It may be called from any goroutine;
// the writer takes the new values at its next Append, Roll or
// ApplyRetention. IndexInterval and Now keep their values from Open.
func (l *Log) SetConfig(c Config) error {
	c.IndexInterval, c.Now = 1, nil // checked below, replaced on adoption
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	l.nextCfg.Store(&c)
	return nil
}

// adoptConfig installs a configuration passed to SetConfig. Only the
// writer calls it. It writes only the fields SetConfig changes, so
// IndexInterval and Now, fixed at Open, may be read by other goroutines
// (the cleaner) without a lock.
func (l *Log) adoptConfig() {
	c := l.nextCfg.Swap(nil)
	if c == nil {
		return
	}
	l.cfg.SegmentBytes, l.cfg.SegmentAge = c.SegmentBytes, c.SegmentAge
	l.cfg.RetentionBytes, l.cfg.RetentionAge = c.RetentionBytes, c.RetentionAge
}
