package stream

// WordLines gives the external benchmarks the generator of the internal
// ones.
var WordLines = wordLines

// WithMaxPendingBatches returns cfg with the driver's bound on the batches
// waiting for the running one set to n.
func WithMaxPendingBatches(cfg Config, n int) Config {
	cfg.maxPendingBatches = n
	return cfg
}
