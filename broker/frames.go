package broker

import (
	"math/bits"
	"sync"
)

// Produce request frames are reused: a produce request of several MiB
// (a client batching hundreds of partitions) otherwise costs a fresh
// allocation, its zeroing and its garbage collection per request. A
// Produce's frame goes back to a pool once its reply is finished, when
// every append has returned and no longer uses the frame's bytes (the
// acceptor wrote or copied them; the response holds only copies). Frames
// of other APIs are never pooled: their decoded requests may keep
// slices of the frame (group metadata, for one).
//
// framePools[k] holds buffers whose capacity is at least 1<<(k+minFrameShift).
var framePools [maxFrameShift - minFrameShift + 1]sync.Pool // of *[]byte

const (
	minFrameShift = 16 // frames below 64 KiB are allocated as before
	maxFrameShift = 28 // 256 MiB: larger buffers are not kept
)

// frameClass is the pool a frame of n bytes (n >= 1<<minFrameShift)
// takes its buffer from: the smallest class whose buffers hold n.
func frameClass(n int) int {
	return bits.Len(uint(n-1)) - minFrameShift
}

// getFrame returns a pooled buffer of length n, or nil if the pool has
// none (or n is small).
func getFrame(n int) []byte {
	if n < 1<<minFrameShift {
		return nil
	}
	k := frameClass(n)
	if k >= len(framePools) {
		return nil
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
	framePools[k].Put(&b)
}
