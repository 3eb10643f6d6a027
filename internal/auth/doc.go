// Package auth holds Sluice's security state: the SCRAM credential store
// (also used to check PLAIN passwords), the ACL store, the authorizer that
// applies Kafka's ACL rules, and the server side of the SASL exchanges.
//
// Files, both in the directory given to Open (the broker uses
// DATA/security):
//
//	credentials.json  per user and SCRAM mechanism: salt, iterations,
//	                  StoredKey and ServerKey (RFC 5802). No password and
//	                  no salted password is kept.
//	acls.json         the ACL bindings, in creation order.
//
// Each is replaced atomically (write a temporary file, fsync it, rename,
// fsync the directory), so a crash leaves the old or the new file.
//
// No function of this package logs or stores a password.
package auth
