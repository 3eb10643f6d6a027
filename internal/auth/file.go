package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedb/sluice/internal/vfs"
)

// writeJSON replaces path with v encoded as JSON, atomically and durably
// (vfs.WriteFilePrivate: readable by the owner only).
func writeJSON(fsys vfs.FS, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := vfs.WriteFilePrivate(fsys, path, append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// readJSON decodes path into v; a missing file leaves v as it is.
func readJSON(fsys vfs.FS, path string, v any) error {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
