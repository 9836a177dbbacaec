// Package dynamolog is a recovery.Log kept in a DynamoDB table: one item per
// entry, one partition per log, written with single-item conditional puts so
// that a writer displaced by a newer one is fenced off (recovery.ErrFenced).
// A worker restarted on any machine with the same log Name recovers exactly
// what its predecessor logged. State snapshots (recovery.SnapshotStore) are
// kept in the same table, each in a partition of its own, split into items
// of SnapshotChunkSize bytes under DynamoDB's 400 KB item limit, so a
// snapshot may be of any size. It lives outside package recovery so that the
// driver, which depends only on the recovery.Log contract, does not pull in
// the DynamoDB SDK.
package dynamolog
