package meta

// delegationTokensFile is the delegation-token store (package auth).
const delegationTokensFile = "delegation-tokens.json"

// DelegationTokensFile is the delegation-token store, in the security
// directory.
func (l Layout) DelegationTokensFile() string { return l.join(securityDir, delegationTokensFile) }
