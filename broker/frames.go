package broker

import (
	"math/bits"
	"sync"
)

// Produce request frames are reused: a produce request of several MiB
// (a client batching hundreds of partitions) otherwise costs a fresh
// allocation, its zeroing and its garbage collection per request. A
// Produce's frame goes back for reuse once its reply is finished, when
// every append has returned and no longer uses the frame's bytes (the
// acceptor wrote or copied them; the response holds only copies), or,
// when new partitions keep slices of it in memory instead of copies
// (storage.Shared, see handleProduce), once the last of them lets go. Frames
// of other APIs are never reused: their decoded requests may keep
// slices of the frame (group metadata, for one).
//
// Returned frames are kept first in frameCache, up to frameCacheBytes in
// all, which a garbage collection leaves alone; beyond that in
// framePools, which every collection may empty. With a sync.Pool alone,
// the collections a busy broker runs every few MiB allocated emptied the
// pools between requests, so that large frames were mostly fresh
// allocations (zeroed, page-faulted in, collected again): 67 MiB of them
// over 2,000,000 100 B records to 2000 partitions, against 31 MiB (the
// frames of the first requests in flight) with the cache.
//
// Class k holds buffers whose capacity is at least 1<<(k+minFrameShift).
var (
	frameCache frameStack
	framePools [frameClasses]sync.Pool // of *[]byte
)

const (
	minFrameShift = 16 // frames below 64 KiB are allocated as before
	maxFrameShift = 28 // 256 MiB: larger buffers are not kept
	frameClasses  = maxFrameShift - minFrameShift + 1

	// frameCacheBytes bounds the idle frames frameCache keeps: the
	// frames of a few connections' requests in flight.
	frameCacheBytes = 32 << 20
)

// frameStack keeps idle frames per class, up to frameCacheBytes in all.
type frameStack struct {
	mu    sync.Mutex
	free  [frameClasses][][]byte // guarded by mu
	bytes int                    // capacity of everything in free; guarded by mu
}

func (s *frameStack) get(k int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.free[k]
	if len(l) == 0 {
		return nil
	}
	b := l[len(l)-1]
	l[len(l)-1] = nil
	s.free[k] = l[:len(l)-1]
	s.bytes -= cap(b)
	return b
}

// put keeps b, of class k, unless that would pass frameCacheBytes.
func (s *frameStack) put(k int, b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+cap(b) > frameCacheBytes {
		return false
	}
	s.free[k] = append(s.free[k], b)
	s.bytes += cap(b)
	return true
}

// frameClass is the pool a frame of n bytes (n >= 1<<minFrameShift)
// takes its buffer from: the smallest class whose buffers hold n.
func frameClass(n int) int {
	return bits.Len(uint(n-1)) - minFrameShift
}

// getFrame returns a kept buffer of length n, or nil if none is kept
// (or n is small).
func getFrame(n int) []byte {
	if n < 1<<minFrameShift {
		return nil
	}
	k := frameClass(n)
	if k >= len(framePools) {
		return nil
	}
	if b := frameCache.get(k); b != nil {
		return b[:n]
	}
	p, ok := framePools[k].Get().(*[]byte)
	if !ok {
		return nil
	}
	return (*p)[:n]
}

// newFrame allocates a buffer of length n whose capacity fills its class,
// so that putFrame files it where getFrame looks for it.
func newFrame(n int) []byte {
	if n < 1<<minFrameShift || frameClass(n) >= len(framePools) {
		return make([]byte, n)
	}
	return make([]byte, n, 1<<(frameClass(n)+minFrameShift))
}

// putFrame gives a Produce frame back for reuse. The caller no longer
// uses it, nor does anything it handed the frame's bytes to.
func putFrame(b []byte) {
	c := cap(b)
	if c < 1<<minFrameShift {
		return
	}
	k := bits.Len(uint(c)) - 1 - minFrameShift // the largest class it fills
	if k >= len(framePools) {
		return
	}
	b = b[:0]
	if !frameCache.put(k, b) {
		framePools[k].Put(&b)
	}
}
