// Package metrics gathers the numbers an operator of a weir pipeline needs
// (batches, shards, checkpoints, leases, recovery) into one Collector, and
// logs warnings at WARN, with the numbers and the likely fix, before trouble:
// scheduling delay above a few batch intervals and growing, a shard's lag
// growing.
//
// A Collector is a stream.Listener (add it to stream.Config.Listeners) that
// also samples Kinesis receivers (Receiver.Stats and friends) and, if given,
// the lease table. Its Snapshot is read by the exporters and the status page,
// which live in packages of their own so that this one needs nothing beyond
// weir: github.com/weirstream/weir/metrics/prometheus serves the numbers to
// Prometheus, github.com/weirstream/weir/status draws them as a web page.
package metrics
