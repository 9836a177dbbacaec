package memory

import (
	"errors"
	"fmt"
)

// Defaults for the Config fields left zero.
const (
	// DefaultName is the stream name of a Source whose Config.Name is empty.
	DefaultName = "memory"
	// DefaultMaxQueued is the Send bound of a Source whose Config.MaxQueued
	// is zero.
	DefaultMaxQueued = 10000
	// MaxShards is the greatest Config.Shards New takes. New builds every
	// shard at once (its name, its log), so a mistyped count (a byte size,
	// 1<<40) would have it run out of memory instead of failing; 10000 is far
	// more than an in-process test or replay needs.
	MaxShards = 10000
)

// ErrInvalidConfig is wrapped by the error New returns for a Config it
// refuses.
var ErrInvalidConfig = errors.New("memory: invalid config")

// Config configures a Source. The zero value is valid: one shard of a stream
// named "memory", a Send bound of 10000 records, everything retained.
type Config struct {
	// Name is the stream name in the ranges of the Source's blocks.
	// Default DefaultName ("memory").
	Name string
	// Shards is the number of synthetic shards, named "shardId-000000000000",
	// "shardId-000000000001" and so on. The records of one Push or Send call
	// go to one shard; successive calls take the shards in turn (round
	// robin), so with one producer the assignment is deterministic.
	// Default 1; at most MaxShards (10000).
	Shards int
	// MaxQueued is the bound Send waits on: Send waits while more than
	// MaxQueued records are queued and not yet in a stored block (pushed and
	// returned by the runtime's Push). Push ignores it. Default
	// DefaultMaxQueued (10000 records).
	MaxQueued int
	// Retain is the number of records kept per shard for Recompute: the
	// latest Retain records pushed to each shard. Recompute of a range with
	// an older record returns a *RangeNotHeldError. Default 0: keep all.
	Retain int
}

// withDefaults returns cfg with its zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Shards == 0 {
		cfg.Shards = 1
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	return cfg
}

// validate reports every problem of cfg together.
func (cfg Config) validate() error {
	var problems []error
	if cfg.Shards < 0 {
		problems = append(problems, fmt.Errorf("Shards %d: must be >= 0 (0 means 1)", cfg.Shards))
	}
	if cfg.Shards > MaxShards {
		problems = append(problems, fmt.Errorf("Shards %d: must be <= %d (MaxShards)", cfg.Shards, MaxShards))
	}
	if cfg.MaxQueued < 0 {
		problems = append(problems, fmt.Errorf("MaxQueued %d: must be >= 0 (0 means %d)", cfg.MaxQueued, DefaultMaxQueued))
	}
	if cfg.Retain < 0 {
		problems = append(problems, fmt.Errorf("Retain %d: must be >= 0 (0 keeps every record)", cfg.Retain))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}
