package meta

import "github.com/sluicedb/sluice/internal/vfs"

// groupConfigsFile holds the group configs (GROUP config resources).
const groupConfigsFile = "group-configs.json"

// GroupConfigs is group-configs.json: each group's configs set with
// IncrementalAlterConfigs or AlterConfigs on its GROUP resource, by
// group id then config name.
type GroupConfigs map[string]map[string]string

// GroupConfigsFile holds GroupConfigs.
func (l Layout) GroupConfigsFile() string { return l.join(groupConfigsFile) }

// ReadGroupConfigs reads group-configs.json; a missing file gives an
// error matching os.ErrNotExist.
func (l Layout) ReadGroupConfigs(fs vfs.FS) (GroupConfigs, error) {
	var g GroupConfigs
	err := readJSON(fs, l.GroupConfigsFile(), &g)
	return g, err
}

// WriteGroupConfigs replaces group-configs.json.
func (l Layout) WriteGroupConfigs(fs vfs.FS, g GroupConfigs) error {
	return writeJSON(fs, l.GroupConfigsFile(), g)
}
