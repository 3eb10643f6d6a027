package broker

// Topic name and partition-count rules.

import "fmt"

// validTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("topic name %q is not allowed", name)
	}
	if len(name) > 249 {
		return fmt.Errorf("topic name is %d characters long, more than 249", len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q holds %q; only ASCII letters, digits, '.', '_' and '-' are allowed", name, r)
		}
	}
	return nil
}

// maxPartitions bounds a topic's partition count (each is a directory,
// open files and a goroutine).
const maxPartitions = 10000
