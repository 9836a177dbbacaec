// Package sealtime says when a block generator seals its blocks, for the
// generator (package source) and for the receivers that time their reads
// to end just before a seal.
package sealtime

import "time"

// Lead is how long before each multiple of the block interval iv (since
// the Unix epoch) a block is sealed: a tenth of the interval, at most
// 20ms. The driver cuts batches at the multiples of the batch interval,
// which are multiples of the block interval when it divides the batch
// interval (as by default), so a block sealed just before a batch is cut
// is pushed in time to be in it, rather than waiting for the next batch.
func Lead(iv time.Duration) time.Duration { return min(iv/10, 20*time.Millisecond) }
