package render

import "sync"

// validCacheSize bounds the digests of objects known to match their schema:
// 32 bytes each, so at most about 1 MiB.
const validCacheSize = 32768

// validCache remembers the digests of rendered objects that matched their
// schema, so an unchanged object is not checked again. When full it starts
// over: a cache miss only costs the check.
type validCache struct {
	mu   sync.Mutex
	sums map[[32]byte]struct{}
}

func (c *validCache) seen(sum [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sums[sum]
	return ok
}

func (c *validCache) add(sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sums == nil || len(c.sums) >= validCacheSize {
		c.sums = make(map[[32]byte]struct{})
	}
	c.sums[sum] = struct{}{}
}
