package meta

// quotasFile holds the client quotas (AlterClientQuotas; package quota
// encodes it).
const quotasFile = "quotas.json"

// QuotasFile is the client-quota store.
func (l Layout) QuotasFile() string { return l.join(quotasFile) }
