// Package metrics gathers the numbers an operator of a weir pipeline needs
// (batches, shards, checkpoints, leases, recovery) into one Collector, and
// logs warnings at WARN, with the numbers and the likely fix, before trouble:
// scheduling delay above a few batch intervals and growing, a shard's lag
// growing.
//
// A Collector is a stream.Listener (add it to stream.Config.Listeners) that
// also samples receivers and, if given, the lease table, through the small
// interfaces Receiver and LeaseLister in this package's own types: it links
// no source and no AWS package. github.com/weirstream/weir/metrics/kinesismetrics
// adapts the Kinesis receiver and its lease table. Its Snapshot is read by
// the exporters and the status page, which live in packages of their own:
// github.com/weirstream/weir/metrics/prometheus serves the numbers to
// Prometheus, github.com/weirstream/weir/status draws them as a web page.
package metrics
