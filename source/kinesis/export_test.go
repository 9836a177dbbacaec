package kinesis

// Servers gives the tests of package kinesis_test the package's shared
// local servers (one test binary, one TestMain).
var Servers = servers

// OnEndCheck makes r call f each time its lease side judges a shard read
// to its end: ready to be marked SHARD_END, or still waiting for records
// to complete. Call it before Start.
func OnEndCheck(r *Receiver, f func(shard string, ready bool)) { r.endChecked = f }
