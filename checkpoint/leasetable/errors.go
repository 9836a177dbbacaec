package leasetable

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by the error kinesismetrics.Leases returns for
// a Config it cannot list, naming each bad field and its fix. kinesis.New
// reports a bad Config.Leases with kinesis.ErrInvalidConfig, naming the
// fields Leases.Field.
var ErrInvalidConfig = errors.New("leasetable: invalid config")

// ErrBadItem is wrapped by every *BadItemError: an item of the lease table
// that cannot be read as a lease.
var ErrBadItem = errors.New("leasetable: unreadable lease item")

// BadItemError describes an item of the lease table that is not a lease
// weir can use: an attribute of the wrong type, a number out of range, a
// checkpoint that is neither a sequence number nor a sentinel, a missing
// leaseCounter or checkpoint. Such an item is left alone: never taken,
// renewed or rewritten, and not counted among the leases, so every other
// shard keeps going; its shard is not read until the item is fixed.
//
// The Kinesis receiver reports each one through the pipeline's error
// reports (source.Runtime.ReportError: logged, and passed to the
// pipeline's listeners), once per item and problem, and counts the items
// (kinesis.Stats.BadLeaseItems); match it with errors.As.
type BadItemError struct {
	// Table is the lease table.
	Table string
	// Key is the item's leaseKey (the shard ID).
	Key string
	// Attr is the attribute at fault.
	Attr string
	// Problem says what is wrong with it.
	Problem string
	// Fix says how to repair the item.
	Fix string
}

// Error names the table, the item, the attribute, the problem and the fix.
func (e *BadItemError) Error() string {
	return fmt.Sprintf("leasetable: table %s, item leaseKey=%q: %s %s; fix: %s", e.Table, e.Key, e.Attr, e.Problem, e.Fix)
}

// Unwrap returns ErrBadItem.
func (e *BadItemError) Unwrap() error { return ErrBadItem }
