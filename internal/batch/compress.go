package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a batch's compression codec, attributes bits 0-2.
type Codec int8

// The codecs of RecordBatch v2.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// MaxDecompressed bounds the decompressed size of one batch's records, so
// that a small hostile batch cannot make the decoder allocate without
// limit (a decompression bomb).
const MaxDecompressed = 256 << 20

// ErrCodec reports an unknown codec or records that do not decompress.
var ErrCodec = errors.New("batch: bad compression")

// Codec pools. Encoders and decoders are expensive to build; these keep
// one per concurrent user.
var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	gzipReaders sync.Pool // *gzip.Reader; gzip.NewReader needs a valid stream

	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder // EncodeAll and DecodeAll are safe for concurrent use
	zstdDec  *zstd.Decoder
)

func zstdCodecs() (*zstd.Encoder, *zstd.Decoder) {
	zstdOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(64<<10), zstd.WithZeroFrames(true))
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(MaxDecompressed))
	})
	return zstdEnc, zstdDec
}

// xerial framing, which the Java client writes for snappy: a header,
// then per block a big-endian length and a raw snappy block.
var (
	xerialMagic  = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	xerialHeader = append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
)

const xerialBlock = 32 << 10

// compress appends src compressed with c to dst.
func compress(dst, src []byte, c Codec) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		buf := bytes.NewBuffer(dst)
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("%w: gzip: %w", ErrCodec, err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("%w: gzip: %w", ErrCodec, err)
		}
		return buf.Bytes(), nil
	case CodecSnappy:
		dst = append(dst, xerialHeader...)
		for len(src) > 0 {
			n := min(len(src), xerialBlock)
			at := len(dst)
			dst = append(dst, 0, 0, 0, 0)
			dst = append(dst, make([]byte, snappy.MaxEncodedLen(n))...)
			enc := snappy.Encode(dst[at+4:], src[:n])
			binary.BigEndian.PutUint32(dst[at:], uint32(len(enc)))
			dst = dst[:at+4+len(enc)]
			src = src[n:]
		}
		return dst, nil
	case CodecLZ4:
		buf := bytes.NewBuffer(dst)
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("%w: lz4: %w", ErrCodec, err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("%w: lz4: %w", ErrCodec, err)
		}
		return buf.Bytes(), nil
	case CodecZstd:
		enc, _ := zstdCodecs()
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: unknown codec %d", ErrCodec, c)
}

// Decompress returns src decompressed with c, refusing to produce more
// than limit bytes (a payload compressed as Kafka's codecs compress, such
// as a client's pushed telemetry).
func Decompress(src []byte, c Codec, limit int) ([]byte, error) {
	return decompress(nil, src, c, limit)
}

// decompress appends src decompressed with c to dst, refusing to produce
// more than limit bytes.
func decompress(dst, src []byte, c Codec, limit int) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		r, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if r == nil {
			r, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = r.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return dst, fmt.Errorf("%w: gzip: %w", ErrCodec, err)
		}
		defer gzipReaders.Put(r)
		return readLimited(dst, r, "gzip", limit)
	case CodecSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return unxerial(dst, src, limit)
		}
		return unsnappy(dst, src, limit)
	case CodecLZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		return readLimited(dst, r, "lz4", limit)
	case CodecZstd:
		_, dec := zstdCodecs()
		out, err := dec.DecodeAll(src, dst)
		if err != nil {
			return dst, fmt.Errorf("%w: zstd: %w", ErrCodec, err)
		}
		if len(out)-len(dst) > limit {
			return dst, fmt.Errorf("%w: zstd: more than %d bytes", ErrCodec, limit)
		}
		return out, nil
	}
	return dst, fmt.Errorf("%w: unknown codec %d", ErrCodec, c)
}

func readLimited(dst []byte, r io.Reader, name string, limit int) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	n, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return dst, fmt.Errorf("%w: %s: %w", ErrCodec, name, err)
	}
	if n > int64(limit) {
		return dst, fmt.Errorf("%w: %s: more than %d bytes", ErrCodec, name, limit)
	}
	return buf.Bytes(), nil
}

func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil || n > limit || n < 0 {
		return dst, fmt.Errorf("%w: snappy block: length %d: %v", ErrCodec, n, err)
	}
	at := len(dst)
	dst = append(dst, make([]byte, n)...)
	out, err := snappy.Decode(dst[at:], src)
	if err != nil || len(out) != n {
		return dst[:at], fmt.Errorf("%w: snappy block: %v", ErrCodec, err)
	}
	return dst, nil
}

func unxerial(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < len(xerialHeader) {
		return dst, fmt.Errorf("%w: snappy: xerial header cut short", ErrCodec)
	}
	start := len(dst)
	src = src[len(xerialHeader):]
	for len(src) > 0 {
		if len(src) < 4 {
			return dst[:start], fmt.Errorf("%w: snappy: xerial block length cut short", ErrCodec)
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return dst[:start], fmt.Errorf("%w: snappy: xerial block of %d bytes, %d left", ErrCodec, n, len(src))
		}
		var err error
		if dst, err = unsnappy(dst, src[:n], limit-(len(dst)-start)); err != nil {
			return dst[:start], err
		}
		src = src[n:]
	}
	return dst, nil
}
