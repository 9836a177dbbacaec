package kinesistest

import (
	"crypto/md5"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/hashkey"
)

// The operation names InjectThrottling and Calls take: the Kinesis API
// calls a *Fake answers.
const (
	OpDescribeStreamSummary = "DescribeStreamSummary"
	OpListShards            = "ListShards"
	OpGetShardIterator      = "GetShardIterator"
	OpGetRecords            = "GetRecords"
)

// Limits the fake enforces as Kinesis does.
const (
	// IteratorTTL is how long a shard iterator stays valid after it is
	// issued, on the fake's clock: 5 minutes, as in Kinesis.
	IteratorTTL = 5 * time.Minute
	// NextTokenTTL is how long a ListShards NextToken stays valid: 300
	// seconds, as in Kinesis.
	NextTokenTTL = 300 * time.Second
	// MaxRecordSize is the largest record data Put accepts: 1 MiB.
	MaxRecordSize = 1 << 20
	// MaxShards is the most shards CreateStream accepts.
	MaxShards = 10000
	// Region and Account make up the ARNs of the fake's streams.
	Region  = "us-east-1"
	Account = "000000000000"
)

// Option changes a setting of New.
type Option func(*Fake)

// WithClock sets the clock of arrival timestamps, iterator and NextToken
// expiry and MillisBehindLatest. Default (and for nil): clock.Real{}, which
// runs in virtual time inside a testing/synctest bubble.
func WithClock(c clock.Clock) Option {
	return func(f *Fake) { f.clock = clock.Or(c) }
}

// Fake is an in-memory Kinesis Data Streams service. It implements
// kinesis.Client (DescribeStreamSummary, ListShards, GetShardIterator,
// GetRecords) and has methods to create streams, put records, reshard,
// trim and inject faults. It is safe for concurrent use.
type Fake struct {
	clock clock.Clock

	mu       sync.Mutex
	streams  map[string]*fstream
	seq      uint64         // the last sequence counter handed out, for every shard
	gen      uint64         // the generation new iterators get
	minGen   uint64         // iterators of an older generation are expired
	throttle map[string]int // operation -> calls left to throttle
	calls    map[string]int // operation -> calls made
}

// fstream is one stream.
type fstream struct {
	name    string
	arn     string
	created time.Time
	shards  []*fshard // in creation order, which is shard ID order
}

// fshard is one shard of a stream.
type fshard struct {
	index     int // the number in its ID, encoded in its sequence numbers
	id        string
	parent    string
	adjacent  string
	lo, hi    *big.Int // hash key range, inclusive
	startSeq  string
	endSeq    string // "" while the shard is open
	records   []frecord
	trimmedTo int // records before this index are trimmed
}

// frecord is one record of a shard.
type frecord struct {
	seq     string
	key     string
	data    []byte
	arrival time.Time
}

// New returns an empty fake with the given options.
func New(opts ...Option) *Fake {
	f := &Fake{
		clock:    clock.Real{},
		streams:  map[string]*fstream{},
		throttle: map[string]int{},
		calls:    map[string]int{},
	}
	for _, o := range opts {
		if o != nil {
			o(f)
		}
	}
	return f
}

// maxHashKey is 2^128-1, the greatest hash key.
var maxHashKey = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// CreateStream creates a stream of shards open shards that split the hash
// key space evenly, as Kinesis does. It fails for a bad name, a shard count
// outside 1..MaxShards, or a name already in use
// (*types.ResourceInUseException).
func (f *Fake) CreateStream(name string, shards int) error {
	if err := checkStreamName(name); err != nil {
		return err
	}
	if shards < 1 || shards > MaxShards {
		return invalidArgument("kinesistest: create stream %q: shards %d: must be 1 to %d", name, shards, MaxShards)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.streams[name]; ok {
		return inUse("Stream %s under account %s already exists.", name, Account)
	}
	s := &fstream{name: name, arn: streamARN(name), created: f.clock.Now()}
	size := new(big.Int).Div(new(big.Int).Add(maxHashKey, big.NewInt(1)), big.NewInt(int64(shards)))
	for i := range shards {
		lo := new(big.Int).Mul(size, big.NewInt(int64(i)))
		hi := new(big.Int).Sub(new(big.Int).Add(lo, size), big.NewInt(1))
		if i == shards-1 {
			hi = new(big.Int).Set(maxHashKey)
		}
		f.addShard(s, lo, hi, "", "")
	}
	f.streams[name] = s
	return nil
}

// checkStreamName checks a name as Kinesis does: 1 to 128 letters, digits,
// '_', '.' and '-'.
func checkStreamName(name string) error {
	ok := name != "" && len(name) <= 128
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			ok = false
		}
	}
	if !ok {
		return invalidArgument("kinesistest: stream name %q: want 1 to 128 letters, digits, '_', '.' or '-'", name)
	}
	return nil
}

// streamARN returns the ARN of the fake's stream name.
func streamARN(name string) string {
	return fmt.Sprintf("arn:aws:kinesis:%s:%s:stream/%s", Region, Account, name)
}

// addShard appends an open shard to s. f.mu is held.
func (f *Fake) addShard(s *fstream, lo, hi *big.Int, parent, adjacent string) *fshard {
	index := len(s.shards)
	sh := &fshard{
		index:    index,
		id:       fmt.Sprintf("shardId-%012d", index),
		parent:   parent,
		adjacent: adjacent,
		lo:       lo,
		hi:       hi,
		startSeq: f.nextSeq(index),
	}
	s.shards = append(s.shards, sh)
	return sh
}

// nextSeq hands out the next sequence number, of shard index. f.mu is held.
func (f *Fake) nextSeq(index int) string {
	f.seq++
	return formatSeq(f.seq, index)
}

// Entry is one record for PutMany.
type Entry struct {
	// PartitionKey chooses the shard (MD5, as Kinesis): 1 to 256 characters.
	PartitionKey string
	// Data is the record's payload, at most MaxRecordSize bytes. The fake
	// keeps its own copy.
	Data []byte
}

// PutResult says where PutMany stored one entry.
type PutResult struct {
	// ShardID is the shard the record went to.
	ShardID string
	// SequenceNumber is the record's sequence number.
	SequenceNumber string
}

// Put stores one record on the open shard whose hash key range holds the
// MD5 hash of partitionKey, arriving now on the fake's clock, and returns
// the shard and sequence number.
func (f *Fake) Put(stream, partitionKey string, data []byte) (shardID, seq string, err error) {
	res, err := f.PutMany(stream, Entry{PartitionKey: partitionKey, Data: data})
	if err != nil {
		return "", "", err
	}
	return res[0].ShardID, res[0].SequenceNumber, nil
}

// PutMany stores entries in order, as Put does each, all or none: an
// invalid entry fails the call before any is stored.
func (f *Fake) PutMany(stream string, entries ...Entry) ([]PutResult, error) {
	for i, e := range entries {
		if n := hashkey.PartitionKeyLen(e.PartitionKey); n < 1 || n > hashkey.MaxPartitionKeyLen {
			return nil, invalidArgument("kinesistest: put on %q: entry %d: partition key %q: want 1 to 256 characters", stream, i, e.PartitionKey)
		}
		if len(e.Data) > MaxRecordSize {
			return nil, invalidArgument("kinesistest: put on %q: entry %d: data of %d bytes: at most %d", stream, i, len(e.Data), MaxRecordSize)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.stream(stream)
	if err != nil {
		return nil, err
	}
	now := f.clock.Now()
	out := make([]PutResult, len(entries))
	for i, e := range entries {
		sh := s.shardForKey(HashKey(e.PartitionKey))
		seq := f.nextSeq(sh.index)
		sh.records = append(sh.records, frecord{seq: seq, key: e.PartitionKey, data: slices.Clone(e.Data), arrival: now})
		out[i] = PutResult{ShardID: sh.id, SequenceNumber: seq}
	}
	return out, nil
}

// HashKey returns the hash key of a partition key: its MD5 digest as a
// 128-bit unsigned integer, as Kinesis computes it.
func HashKey(partitionKey string) *big.Int {
	sum := md5.Sum([]byte(partitionKey))
	return new(big.Int).SetBytes(sum[:])
}

// shardForKey returns the open shard whose range holds h. The open shards
// always cover the whole key space.
func (s *fstream) shardForKey(h *big.Int) *fshard {
	for _, sh := range s.shards {
		if sh.endSeq == "" && sh.lo.Cmp(h) <= 0 && h.Cmp(sh.hi) <= 0 {
			return sh
		}
	}
	return s.shards[len(s.shards)-1] // unreachable: the open shards cover every key
}

// stream finds a stream by name or ARN. f.mu is held.
func (f *Fake) stream(nameOrARN string) (*fstream, error) {
	if s, ok := f.streams[nameOrARN]; ok {
		return s, nil
	}
	for _, s := range f.streams {
		if s.arn == nameOrARN {
			return s, nil
		}
	}
	return nil, notFound("Stream %s under account %s not found.", nameOrARN, Account)
}

// shard finds a shard of s by ID.
func (s *fstream) shard(id string) (*fshard, error) {
	for _, sh := range s.shards {
		if sh.id == id {
			return sh, nil
		}
	}
	return nil, notFound("Shard %s in stream %s under account %s does not exist", id, s.name, Account)
}

// openShard finds an open shard of a stream, for resharding. f.mu is held.
func (f *Fake) openShard(stream, shard string) (*fstream, *fshard, error) {
	s, err := f.stream(stream)
	if err != nil {
		return nil, nil, err
	}
	sh, err := s.shard(shard)
	if err != nil {
		return nil, nil, err
	}
	if sh.endSeq != "" {
		return nil, nil, notFound("Shard %s in stream %s under account %s has already been merged or split, and thus is not eligible for merging or splitting.", shard, s.name, Account)
	}
	return s, sh, nil
}

// SplitShard splits an open shard in the middle of its hash key range; see
// SplitShardAt.
func (f *Fake) SplitShard(stream, shard string) (left, right string, err error) {
	f.mu.Lock()
	_, sh, err := f.openShard(stream, shard)
	var mid string
	if err == nil {
		m := new(big.Int).Add(sh.lo, sh.hi)
		mid = m.Rsh(m, 1).Add(m, big.NewInt(1)).String()
	}
	f.mu.Unlock()
	if err != nil {
		return "", "", err
	}
	return f.SplitShardAt(stream, shard, mid)
}

// SplitShardAt splits an open shard at newStartingHashKey (a decimal hash
// key inside the shard's range, above its start), as Kinesis SplitShard
// does, at once: the shard is closed (its EndingSequenceNumber set, its
// records still readable, its iterators reaching its end) and two open
// children are made, left with the keys below newStartingHashKey and right
// with the others, both with the shard as ParentShardId.
func (f *Fake) SplitShardAt(stream, shard, newStartingHashKey string) (left, right string, err error) {
	key, ok := new(big.Int).SetString(newStartingHashKey, 10)
	f.mu.Lock()
	defer f.mu.Unlock()
	s, sh, err := f.openShard(stream, shard)
	if err != nil {
		return "", "", err
	}
	if !ok || key.Cmp(sh.lo) <= 0 || key.Cmp(sh.hi) > 0 {
		return "", "", invalidArgument("NewStartingHashKey %q: must be a decimal hash key in (%s, %s] of shard %s", newStartingHashKey, sh.lo, sh.hi, shard)
	}
	sh.endSeq = f.nextSeq(sh.index)
	l := f.addShard(s, sh.lo, new(big.Int).Sub(key, big.NewInt(1)), sh.id, "")
	r := f.addShard(s, key, sh.hi, sh.id, "")
	return l.id, r.id, nil
}

// MergeShards merges two open shards with adjacent hash key ranges, as
// Kinesis MergeShards does, at once: both are closed and one open child is
// made over both ranges, with a as ParentShardId and b as
// AdjacentParentShardId.
func (f *Fake) MergeShards(stream, a, b string) (child string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, sa, err := f.openShard(stream, a)
	if err != nil {
		return "", err
	}
	_, sb, err := f.openShard(stream, b)
	if err != nil {
		return "", err
	}
	lo, hi := sa, sb
	if sb.lo.Cmp(sa.lo) < 0 {
		lo, hi = sb, sa
	}
	if new(big.Int).Add(lo.hi, big.NewInt(1)).Cmp(hi.lo) != 0 {
		return "", invalidArgument("Shards %s and %s in stream %s under account %s are not an adjacent pair of shards eligible for merging", a, b, s.name, Account)
	}
	sa.endSeq = f.nextSeq(sa.index)
	sb.endSeq = f.nextSeq(sb.index)
	c := f.addShard(s, lo.lo, hi.hi, sa.id, sb.id)
	return c.id, nil
}

// Trim drops the records of a shard whose sequence numbers are less than
// before, as the retention period does: TRIM_HORIZON and iterators at or
// after a trimmed number then start at the oldest record kept.
func (f *Fake) Trim(stream, shard, before string) error {
	if err := batch.ValidateSeq(before); err != nil {
		return invalidArgument("kinesistest: trim %s/%s: %v", stream, shard, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.stream(stream)
	if err != nil {
		return err
	}
	sh, err := s.shard(shard)
	if err != nil {
		return err
	}
	i := sh.search(func(r frecord) bool { return batch.CompareSeq(r.seq, before) >= 0 })
	if i > sh.trimmedTo {
		for j := sh.trimmedTo; j < i; j++ {
			sh.records[j].data = nil // gone: let the memory go
		}
		sh.trimmedTo = i
	}
	return nil
}

// search returns the index of the first record at or after the oldest kept
// for which ok is true (ok must be monotone), len(records) if none.
func (sh *fshard) search(ok func(frecord) bool) int {
	rest := sh.records[sh.trimmedTo:]
	return sh.trimmedTo + sort.Search(len(rest), func(i int) bool { return ok(rest[i]) })
}

// InjectThrottling makes the next n calls of op (one of the Op constants)
// fail as Kinesis throttles them: GetRecords and GetShardIterator with
// *types.ProvisionedThroughputExceededException, ListShards and
// DescribeStreamSummary with *types.LimitExceededException. n adds to any
// throttling still pending; 0 cancels it.
func (f *Fake) InjectThrottling(op string, n int) error {
	if !knownOp(op) {
		return fmt.Errorf("kinesistest: InjectThrottling: operation %q: want %s, %s, %s or %s", op, OpDescribeStreamSummary, OpListShards, OpGetShardIterator, OpGetRecords)
	}
	if n < 0 {
		return fmt.Errorf("kinesistest: InjectThrottling(%s): n %d: must be >= 0", op, n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == 0 {
		delete(f.throttle, op)
	} else {
		f.throttle[op] += n
	}
	return nil
}

func knownOp(op string) bool {
	switch op {
	case OpDescribeStreamSummary, OpListShards, OpGetShardIterator, OpGetRecords:
		return true
	}
	return false
}

// ExpireIterators makes every shard iterator issued so far fail with
// *types.ExpiredIteratorException on its next use; iterators issued later
// are valid.
func (f *Fake) ExpireIterators() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	f.minGen = f.gen
}

// Calls returns how many calls of op (one of the Op constants) were made,
// throttled and failed ones included.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Shards returns every shard of a stream, closed ones included, as
// ListShards describes them, in shard ID order.
func (f *Fake) Shards(stream string) ([]types.Shard, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.stream(stream)
	if err != nil {
		return nil, err
	}
	out := make([]types.Shard, len(s.shards))
	for i, sh := range s.shards {
		out[i] = sh.describe()
	}
	return out, nil
}

// describe returns the shard as the API describes it.
func (sh *fshard) describe() types.Shard {
	d := types.Shard{
		ShardId:             aws.String(sh.id),
		HashKeyRange:        &types.HashKeyRange{StartingHashKey: aws.String(sh.lo.String()), EndingHashKey: aws.String(sh.hi.String())},
		SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String(sh.startSeq)},
	}
	if sh.parent != "" {
		d.ParentShardId = aws.String(sh.parent)
	}
	if sh.adjacent != "" {
		d.AdjacentParentShardId = aws.String(sh.adjacent)
	}
	if sh.endSeq != "" {
		d.SequenceNumberRange.EndingSequenceNumber = aws.String(sh.endSeq)
	}
	return d
}
