// Package quota holds the client quotas of a broker and their
// accounting, as Kafka defines them (KIP-13, KIP-55, KIP-124, KIP-219,
// KIP-257, KIP-599).
//
// A quota is a limit on one of four keys (ProducerByteRate,
// ConsumerByteRate, RequestPercentage, ControllerMutationRate) set for an
// Entity: a user, a client id, or both, each either named or the default
// of its level. A request's user and client id find their limit for a
// key in Kafka's precedence order (Resolve):
//
//  1. user and client id            /config/users/<user>/clients/<client-id>
//  2. user, default client id       /config/users/<user>/clients/<default>
//  3. user                          /config/users/<user>
//  4. default user and client id    /config/users/<default>/clients/<client-id>
//  5. default user, default client  /config/users/<default>/clients/<default>
//  6. default user                  /config/users/<default>
//  7. client id                     /config/clients/<client-id>
//  8. default client id             /config/clients/<default>
//
// Each key is resolved on its own: a user may take its produce limit from
// rule 3 and its fetch limit from rule 8. The level that matched also says
// who shares the limit: a limit found at rule 7 is shared by every user
// of that client id, one found at rule 6 is applied to each user apart.
//
// Accounting (Manager.Record) keeps, per key and sharing entity, a
// token bucket that fills at the limit's rate and holds at most the rate
// window's worth of it (quota.window.num × quota.window.size.seconds):
// a fresh client may burst one window's worth, after that it is held to
// the rate. A request that takes the bucket below zero gets the time the
// bucket needs to refill to zero as its throttle time (bounded by the
// window). Kafka computes the same throttle from a sampled rate over the
// window; with a client much faster than its limit that lets it burst
// again each time an old sample leaves the window, which the bucket does
// not. The sampled rate (Rate) is kept for the metrics.
//
// With no quota set for a key, Record returns at once without a lock.
package quota
