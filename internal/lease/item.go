package lease

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
)

// Attribute names of a lease item, exactly as the Kinesis Client Library's
// DynamoDBLeaseSerializer (KCL 2.x and 3.x) names them, with the DynamoDB
// type it gives each.
const (
	attrKey           = "leaseKey"                     // S, the hash key
	attrOwner         = "leaseOwner"                   // S, absent when unowned
	attrCounter       = "leaseCounter"                 // N
	attrCheckpoint    = "checkpoint"                   // S: a sequence number or a sentinel
	attrSubSeq        = "checkpointSubSequenceNumber"  // N
	attrOwnerSwitches = "ownerSwitchesSinceCheckpoint" // N
	attrParents       = "parentShardId"                // SS (singular name, a set)
	attrChildren      = "childShardIds"                // SS
	attrStartHash     = "startingHashKey"              // S, a decimal number
	attrEndHash       = "endingHashKey"                // S, a decimal number
	attrPending       = "pendingCheckpoint"            // S
	attrPendingSubSeq = "pendingCheckpointSubSequenceNumber"
	attrPendingState  = "pendingCheckpointState" // B
	attrThroughput    = "throughputKBps"         // N (a double)
	attrCkptOwner     = "checkpointOwner"        // S: KCL 3.x graceful hand-off
	attrEntityType    = "entityType"             // S: KCL 3.x, "LEASE" for a lease
	// entityLease is the entityType of a lease; KCL 3.x keeps other
	// entities (leader lock, worker metrics, migration state) in the same
	// table under other values, and items without the attribute are leases.
	entityLease = "LEASE"
	// attrLegacyParents is the name weir used for parentShardId before it
	// followed the KCL's name; it is still read (see Lease.Parents).
	attrLegacyParents = "parentShardIds"
	// attrWeirCheckpoint is weir's own: every checkpoint weir writes also
	// goes here, so a reader can tell weir's checkpoints from a KCL
	// application's (which ignores and keeps unknown attributes).
	attrWeirCheckpoint = "weirCheckpoint"
	// attrBeatPrefix and attrNoticePrefix name weir's own attributes of the
	// beat board (see board.go), one pair per worker: "weirBeat:" + worker
	// ID, a number each beat of the worker adds one to, and "weirStolen:" +
	// worker ID, a string set of the steal notices ("shard counter") other
	// workers left for it. The KCL ignores and keeps them.
	attrBeatPrefix   = "weirBeat:"
	attrNoticePrefix = "weirStolen:"
	// attrLatestAt is weir's own: on a lease whose checkpoint is LATEST, the
	// time (Unix milliseconds, N) LATEST was resolved to when a worker first
	// took the lease (see Lease.LatestAt). The KCL, whose table has no room
	// for a timestamp (its AT_TIMESTAMP takes the time from the
	// application's configuration), ignores and keeps it.
	attrLatestAt = "weirLatestAt"
)

// LatestMargin is how far before the time of its first take, on the
// earlier of the taking worker's clock and DynamoDB's, a lease at LATEST is
// pinned (Lease.LatestAt): room for DynamoDB's clock, which dates its
// answers, and the clock Kinesis stamps records with
// (ApproximateArrivalTimestamp) to differ, so that the pin is not later
// than the records the first worker's LATEST iterator returns.
// A shard reader started at LATEST pins its start by the same margin, on
// its own clock.
const LatestMargin = 5 * time.Second

// fixes says how to repair each attribute, for leasetable.BadItemError.Fix.
var fixes = map[string]string{
	attrOwner:   "set leaseOwner to a worker ID (a string), or remove it to leave the lease unowned",
	attrCounter: "set leaseCounter to a whole number that fits in 64 bits (for example 0); every worker's next write is conditional on it",
	attrCheckpoint: "set checkpoint to the sequence number of the last record processed, or to TRIM_HORIZON to read the shard " +
		"again from its oldest record (LATEST would skip what was not processed)",
	attrSubSeq:        "set checkpointSubSequenceNumber to a whole number (0 for a record that is not a KPL aggregate)",
	attrOwnerSwitches: "set ownerSwitchesSinceCheckpoint to a whole number, or remove it",
}

func fixFor(attr string) string {
	if f, ok := fixes[attr]; ok {
		return f
	}
	return "give " + attr + " the type the Kinesis Client Library writes, or remove it"
}

// Lease is one shard's item in the lease table: the attributes a user sees
// (Public), documented on leasetable.Lease, and the protocol's.
type Lease struct {
	// Shard (leaseKey, the hash key), Owner (leaseOwner, "" if none) and
	// Counter (leaseCounter, the version every write adds one to and is
	// conditional on) are as leasetable.Lease documents them.
	Shard, Owner string
	Counter      int64
	// Checkpoint is a sequence number, or checkpointer.TrimHorizon,
	// checkpointer.LatestPosition, checkpointer.AtTimestamp or
	// checkpointer.ShardEnd (checkpoint).
	Checkpoint string
	// SubSequence is the KPL sub-record within Checkpoint
	// (checkpointSubSequenceNumber); weir writes 0. With a KCL checkpoint
	// (see WrittenByWeir), the user records at Checkpoint up to and
	// including this sub-sequence number are processed, as the KCL reads
	// it; a record that is not an aggregate has sub-sequence number 0.
	SubSequence int64
	// WeirCheckpoint is the checkpoint weir last wrote (weirCheckpoint, an
	// attribute the KCL ignores and keeps), "" if weir never wrote one.
	// See WrittenByWeir.
	WeirCheckpoint string
	// OwnerSwitches counts owner changes since the last checkpoint
	// (ownerSwitchesSinceCheckpoint).
	OwnerSwitches int64
	// Parents are the shard's parent shard IDs (parentShardId, a string
	// set). Items written by weir before it used the KCL's name hold them
	// in parentShardIds, which is read too; a take copies them to
	// parentShardId.
	Parents []string
	// Children are the shard's child shard IDs (childShardIds), known once
	// the shard ended.
	Children []string
	// StartingHashKey and EndingHashKey are the shard's hash key range
	// (startingHashKey, endingHashKey: decimal strings), "" if not stored.
	StartingHashKey, EndingHashKey string
	// PendingCheckpoint and PendingCheckpointSubSequence are a KCL
	// application's prepared checkpoint (pendingCheckpoint,
	// pendingCheckpointSubSequenceNumber), "" and 0 if none. weir reads
	// them for information and never writes or removes them.
	PendingCheckpoint            string
	PendingCheckpointSubSequence int64
	// CheckpointOwner is the worker still processing the shard during a KCL
	// 3.x graceful hand-off (checkpointOwner), "" if none. A take removes
	// it, as the KCL's does.
	CheckpointOwner string
	// LatestAt is, while Checkpoint is checkpointer.LatestPosition, the time
	// LATEST was resolved to (weirLatestAt, Unix milliseconds): the time a
	// Coordinator first took the lease, on the earlier of its clock and
	// DynamoDB's (the Date of its answers), less LatestMargin; the zero
	// time if none. Every owner reads
	// such a shard from this time (AT_TIMESTAMP), so a worker that dies
	// before its first checkpoint leaves no gap: its successor starts no
	// later than it did. A checkpoint write removes it.
	LatestAt time.Time
}

// WrittenByWeir reports whether weir wrote the lease's checkpoint: it is
// the one weir last wrote (WeirCheckpoint) with sub-sequence 0. weir
// checkpoints whole Kinesis records, so every record up to and including
// such a checkpoint is processed. Otherwise a Kinesis Client Library
// application wrote it, whose checkpoint (seq, subSeq) means the user
// records up to that sub-record of seq are processed, not necessarily the
// rest of a KPL aggregate at seq.
func (l Lease) WrittenByWeir() bool {
	return l.Checkpoint != "" && l.Checkpoint == l.WeirCheckpoint && l.SubSequence == 0
}

// Public returns the attributes of l a user sees (kinesis.Receiver.HeldLeases).
func (l Lease) Public() leasetable.Lease {
	return leasetable.Lease{
		Shard: l.Shard, Owner: l.Owner, Counter: l.Counter,
		Checkpoint: l.Checkpoint, SubSequence: l.SubSequence, Parents: l.Parents,
	}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func keyOf(shard string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: str(shard)}
}

// encodeLease writes a new lease item as the KCL's serializer does; sets
// and strings are left out when empty (DynamoDB refuses empty sets).
func encodeLease(l Lease) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrKey:           str(l.Shard),
		attrCounter:       num(l.Counter),
		attrCheckpoint:    str(l.Checkpoint),
		attrSubSeq:        num(l.SubSequence),
		attrOwnerSwitches: num(l.OwnerSwitches),
		attrEntityType:    str(entityLease),
	}
	for name, v := range map[string]string{
		attrOwner: l.Owner, attrWeirCheckpoint: l.WeirCheckpoint,
		attrStartHash: l.StartingHashKey, attrEndHash: l.EndingHashKey,
	} {
		if v != "" {
			item[name] = str(v)
		}
	}
	if len(l.Parents) > 0 {
		item[attrParents] = &types.AttributeValueMemberSS{Value: l.Parents}
	}
	if len(l.Children) > 0 {
		item[attrChildren] = &types.AttributeValueMemberSS{Value: l.Children}
	}
	return item
}

// decodeLease reads a lease item. ok is false, with no error, for an item
// of another KCL entity type. Attributes it does not know are ignored, and
// kept in the table since every write is an update. An item weir cannot
// use returns a *leasetable.BadItemError (Table left for the caller to fill in).
func decodeLease(item map[string]types.AttributeValue) (l Lease, ok bool, err error) {
	var d decoder
	d.item = item
	l.Shard = d.str(attrKey)
	if l.Shard == "" && d.err == nil {
		d.fail(attrKey, "is missing or empty")
	}
	if et := d.str(attrEntityType); d.err == nil && et != "" && et != entityLease {
		return Lease{}, false, nil
	}
	l.Owner = d.str(attrOwner)
	l.Counter = d.num(attrCounter, true)
	l.Checkpoint = d.str(attrCheckpoint)
	switch {
	case d.err != nil:
	case l.Checkpoint == "":
		d.fail(attrCheckpoint, "is missing")
	case !validCheckpoint(l.Checkpoint):
		d.fail(attrCheckpoint, fmt.Sprintf("%q is neither a sequence number nor %s, %s, %s or %s", l.Checkpoint,
			checkpointer.TrimHorizon, checkpointer.LatestPosition, checkpointer.AtTimestamp, checkpointer.ShardEnd))
	}
	l.SubSequence = d.num(attrSubSeq, false)
	l.OwnerSwitches = d.num(attrOwnerSwitches, false)
	l.WeirCheckpoint = d.str(attrWeirCheckpoint)
	l.Parents = d.set(attrParents)
	if legacy := d.set(attrLegacyParents); len(l.Parents) == 0 {
		l.Parents = legacy
	}
	l.Children = d.set(attrChildren)
	l.StartingHashKey = d.str(attrStartHash)
	l.EndingHashKey = d.str(attrEndHash)
	l.PendingCheckpoint = d.str(attrPending)
	l.PendingCheckpointSubSequence = d.num(attrPendingSubSeq, false)
	l.CheckpointOwner = d.str(attrCkptOwner)
	if ms := d.num(attrLatestAt, false); ms != 0 {
		l.LatestAt = time.UnixMilli(ms)
	}
	if d.err != nil {
		d.err.Key = l.Shard
		if s, isS := item[attrKey].(*types.AttributeValueMemberS); isS {
			d.err.Key = s.Value
		}
		return Lease{}, true, d.err
	}
	return l, true, nil
}

// decoder reads typed attributes of an item and keeps the first problem.
type decoder struct {
	item map[string]types.AttributeValue
	err  *leasetable.BadItemError
}

func (d *decoder) fail(attr, problem string) {
	if d.err == nil {
		d.err = &leasetable.BadItemError{Attr: attr, Problem: problem, Fix: fixFor(attr)}
	}
}

// str reads a string attribute; absent or NULL is "".
func (d *decoder) str(name string) string {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		d.fail(name, fmt.Sprintf("is %s, want a string (S)", typeName(v)))
		return ""
	}
}

// num reads a whole-number attribute that fits in an int64; absent or NULL
// is 0 unless required.
func (d *decoder) num(name string, required bool) int64 {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		if required {
			d.fail(name, "is missing")
		}
		return 0
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d.fail(name, fmt.Sprintf("%s is not a whole number that fits in 64 bits", v.Value))
		}
		return n
	default:
		d.fail(name, fmt.Sprintf("is %s, want a number (N)", typeName(v)))
		return 0
	}
}

// set reads a string-set attribute; absent or NULL is nil.
func (d *decoder) set(name string) []string {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberSS:
		return v.Value
	default:
		d.fail(name, fmt.Sprintf("is %s, want a string set (SS)", typeName(v)))
		return nil
	}
}

// typeName is the DynamoDB type of v, as the console shows it.
func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "a string (S)"
	case *types.AttributeValueMemberN:
		return "a number (N)"
	case *types.AttributeValueMemberB:
		return "binary (B)"
	case *types.AttributeValueMemberBOOL:
		return "a boolean (BOOL)"
	case *types.AttributeValueMemberSS:
		return "a string set (SS)"
	case *types.AttributeValueMemberNS:
		return "a number set (NS)"
	case *types.AttributeValueMemberBS:
		return "a binary set (BS)"
	case *types.AttributeValueMemberL:
		return "a list (L)"
	case *types.AttributeValueMemberM:
		return "a map (M)"
	}
	return fmt.Sprintf("%T", v)
}

func validCheckpoint(s string) bool {
	switch s {
	case checkpointer.TrimHorizon, checkpointer.LatestPosition, checkpointer.AtTimestamp, checkpointer.ShardEnd:
		return true
	}
	return batch.ValidateSeq(s) == nil
}
