package imagecache

// SetFreeSpace replaces the cache's free-space probe.
func (c *Cache) SetFreeSpace(f func() (int64, error)) { c.free = f }
