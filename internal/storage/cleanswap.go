package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicedb/sluice/internal/vfs"
)

// The swap protocol that replaces a run of sealed segments S1..Sk with
// one cleaned segment N holding the same offsets (base = S1's base):
//
//  1. N is written to <base>.log.cleaned, fsynced, and the directory
//     fsynced. A crash here leaves the old segments; Open removes the
//     .cleaned file.
//  2. The manifest clean-swap (base, k, the bases of S1..Sk) is written to
//     a temporary file, fsynced, renamed into place, directory fsynced.
//     From here the swap is committed: Open rolls it forward.
//  3. S1's index files and S2..Sk's files are removed, <base>.log.cleaned
//     is renamed over S1's <base>.log, the directory fsynced; N's indexes
//     are written, the directory fsynced; the manifest is removed and the
//     directory fsynced.
//
// Rolling forward at Open repeats step 3: it removes S1's index files
// (they describe the old bytes; N's are rebuilt by scanning), S2..Sk's
// files if present, renames .cleaned over <base>.log if it is still
// there, and removes the manifest. Every step is idempotent, so a crash
// during recovery is recovered the same way. At any crash point the
// directory holds either S1..Sk or N, never a mix.
const (
	cleanSwapName   = "clean-swap"
	cleanSwapMagic  = "SLCS"
	cleanedSuffix   = ".cleaned"
	maxSwapSegments = 1 << 20
)

func encodeSwap(bases []int64) []byte {
	b := make([]byte, 0, 16+8*len(bases))
	b = append(b, cleanSwapMagic...)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(bases)))
	for _, base := range bases {
		b = binary.BigEndian.AppendUint64(b, uint64(base))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeSwap(b []byte) ([]int64, error) {
	if len(b) < 16 || string(b[:4]) != cleanSwapMagic || binary.BigEndian.Uint32(b[4:]) != 1 {
		return nil, fmt.Errorf("storage: %s malformed", cleanSwapName)
	}
	n := int(binary.BigEndian.Uint32(b[8:]))
	if n < 1 || n > maxSwapSegments || len(b) != 16+8*n {
		return nil, fmt.Errorf("storage: %s malformed (%d segments, %d bytes)", cleanSwapName, n, len(b))
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("storage: %s checksum mismatch", cleanSwapName)
	}
	bases := make([]int64, n)
	for i := range bases {
		bases[i] = int64(binary.BigEndian.Uint64(b[12+8*i:]))
	}
	return bases, nil
}

func segPaths(dir string, base int64) (log, index, timeIndex string) {
	stem := filepath.Join(dir, segmentName(base))
	return stem + logSuffix, stem + indexSuffix, stem + timeIndexSuffix
}

func removeIfPresent(fs vfs.FS, name string) error {
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// finishSwap carries out step 3 of the protocol for the segments bases
// (the first is the cleaned segment's base). n, when not nil, is the
// cleaned segment whose indexes to write; at recovery it is nil and the
// indexes are rebuilt by Open's scan.
func finishSwap(fs vfs.FS, dir string, bases []int64, n *segment) error {
	_, idx, tidx := segPaths(dir, bases[0])
	for _, p := range []string{idx, tidx} {
		if err := removeIfPresent(fs, p); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	for _, base := range bases[1:] {
		lp, ip, tp := segPaths(dir, base)
		for _, p := range []string{lp, ip, tp} {
			if err := removeIfPresent(fs, p); err != nil {
				return fmt.Errorf("remove %s: %w", p, err)
			}
		}
	}
	final, _, _ := segPaths(dir, bases[0])
	if err := fs.Rename(final+cleanedSuffix, final); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rename %s: %w", final+cleanedSuffix, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	if n != nil {
		if err := writeIndexes(fs, n); err != nil {
			return err
		}
		if err := fs.SyncDir(dir); err != nil {
			return fmt.Errorf("sync directory %s: %w", dir, err)
		}
	}
	if err := removeIfPresent(fs, filepath.Join(dir, cleanSwapName)); err != nil {
		return fmt.Errorf("remove %s: %w", cleanSwapName, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// recoverSwap runs first in Open: it rolls a committed swap forward, or
// removes the .cleaned files of one that was not committed. It reports
// whether it changed anything.
func recoverSwap(fs vfs.FS, dir string) (bool, error) {
	b, err := vfs.ReadFile(fs, filepath.Join(dir, cleanSwapName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		names, err := fs.ReadDir(dir)
		if err != nil {
			return false, fmt.Errorf("storage: list %s: %w", dir, err)
		}
		changed := false
		for _, n := range names {
			if strings.HasSuffix(n, cleanedSuffix) {
				if err := fs.Remove(filepath.Join(dir, n)); err != nil {
					return changed, fmt.Errorf("storage: remove uncommitted %s: %w", n, err)
				}
				changed = true
			}
		}
		if changed {
			if err := fs.SyncDir(dir); err != nil {
				return changed, fmt.Errorf("storage: sync directory %s: %w", dir, err)
			}
		}
		return changed, nil
	case err != nil:
		return false, fmt.Errorf("storage: read %s: %w", cleanSwapName, err)
	}
	bases, err := decodeSwap(b)
	if err != nil {
		// The manifest was renamed into place whole; damage here is not
		// a torn write and guessing could lose segments.
		return false, fmt.Errorf("%w (in %s; an operator must decide whether <base>.log%s replaces the segments it names)", err, dir, cleanedSuffix)
	}
	if err := finishSwap(fs, dir, bases, nil); err != nil {
		return false, fmt.Errorf("storage: roll compaction swap forward: %w", err)
	}
	return true, nil
}
