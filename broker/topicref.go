package broker

import "github.com/twmb/franz-go/pkg/kerr"

// topicRef resolves a topic named in a request either by name or, for
// the versions that name topics by id (KIP-516), by id. It returns the
// topic's name (the id's topic's name, or "" for an unknown id), the topic
// (nil when unknown) and the error code an unknown topic gets:
// UNKNOWN_TOPIC_ID by id, UNKNOWN_TOPIC_OR_PARTITION by name.
func (b *Broker) topicRef(byID bool, name string, id [16]byte) (string, *topic, *kerr.Error) {
	if !byID {
		return name, b.lookup(name), kerr.UnknownTopicOrPartition
	}
	t := b.lookupID(id)
	if t == nil {
		return "", nil, kerr.UnknownTopicID
	}
	return t.name, t, kerr.UnknownTopicID
}
