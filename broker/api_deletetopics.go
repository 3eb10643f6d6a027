package broker

// DeleteTopics v0-6.
//
// Behaviour:
//   - Topics by name (v0-v5) or by name or id (v6). The topic is removed
//     from metadata at once; its partitions' acceptors finish and fsync
//     what they were given, the logs are closed, and the topic directory
//     is moved aside atomically and then removed, so a crash never
//     leaves half a topic.
//   - An unknown name gets UNKNOWN_TOPIC_OR_PARTITION, an unknown id
//     UNKNOWN_TOPIC_ID.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteTopics.Int16(), 0, 6, handleDeleteTopics) }

func handleDeleteTopics(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{t.Topic, t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var err error
		if tg.name == nil || *tg.name == "" {
			if t := r.b.lookupID(tg.id); t != nil && !r.allowed(opDescribe, resTopic, t.name) {
				err = errCode(kerr.TopicAuthorizationFailed, "not authorized to describe the topic with id %x", tg.id)
			} else if t != nil && !r.allowed(opDelete, resTopic, t.name) {
				name := t.name
				st.Topic = &name
				err = errCode(kerr.TopicAuthorizationFailed, "not authorized to delete topic %q", name)
			} else if t != nil {
				name := t.name
				st.Topic = &name
				err = r.deleteTopicQuota(name, req.Version >= 5)
			} else {
				err = errCode(kerr.UnknownTopicID, "no topic has id %x", tg.id)
			}
		} else if !r.allowed(opDelete, resTopic, *tg.name) {
			err = errCode(kerr.TopicAuthorizationFailed, "not authorized to delete topic %q", *tg.name)
		} else {
			if t := r.b.lookup(*tg.name); t != nil {
				st.TopicID = t.id
			}
			err = r.deleteTopicQuota(*tg.name, req.Version >= 5)
		}
		if err != nil {
			st.ErrorCode = codeOf(err)
			if req.Version >= 5 {
				msg := errMessage(err)
				st.ErrorMessage = &msg
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
