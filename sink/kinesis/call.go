package kinesis

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/internal/kpl"
)

// call is one PutRecords call being built: at most one Kinesis record per
// partition key, each holding the first pending record of its key or, with
// aggregation, a KPL aggregate of the first pending records of its key, in
// batch order. A Kinesis record is written or fails as a whole, so no
// record of a key can be written before an earlier one of its key.
type call struct {
	requestBytes, maxRecordBytes int
	aggregate                    bool

	// keys maps each key met in the pending records scanned to its
	// Kinesis record in kin, or to -1 when the key is held back this round
	// (its next record did not fit): the rest of its records wait too.
	keys map[string]int
	kin  []kinesisRecord
	size int // bytes of data and partition keys in the call
}

// kinesisRecord is one Kinesis record of a call: one record of the batch,
// or an aggregate of several of one key.
type kinesisRecord struct {
	key  string
	idx  []int32 // the records' indexes in the batch, ascending
	size int     // bytes of its data: the record's, or the aggregate's
}

func newCall(requestBytes, maxRecordBytes int, aggregate bool) *call {
	return &call{requestBytes: requestBytes, maxRecordBytes: maxRecordBytes, aggregate: aggregate,
		keys: make(map[string]int, maxRequestRecords)}
}

// build fills the call from pending (indexes of recs, ascending), taking no
// index at or above limit.
func (c *call) build(recs []entry, pending []int32, limit int) {
	clear(c.keys)
	c.kin, c.size = c.kin[:0], 0
	for _, i := range pending {
		if int(i) >= limit {
			break
		}
		r := &recs[i]
		k, seen := c.keys[r.key]
		switch {
		case !seen && len(c.kin) == maxRequestRecords:
			if !c.aggregate {
				return // full: nothing more can join
			}
			// No new key can join; the aggregates may still grow.
		case !seen:
			c.keys[r.key] = -1
			if c.size+len(r.key)+len(r.data) <= c.requestBytes {
				c.keys[r.key] = len(c.kin)
				c.size += len(r.key) + len(r.data)
				c.kin = append(c.kin, kinesisRecord{key: r.key, idx: append(c.nextIdx(), i), size: len(r.data)})
			}
		case k >= 0 && c.aggregate:
			c.add(k, i, r)
		}
	}
}

// nextIdx returns the index slice of the next Kinesis record, reusing the
// memory of an earlier call's.
func (c *call) nextIdx() []int32 {
	if len(c.kin) < cap(c.kin) {
		return c.kin[:len(c.kin)+1][len(c.kin)].idx[:0]
	}
	return nil
}

// add puts record i into the aggregate of Kinesis record k if it fits in
// a record and in the call; otherwise its key is held back.
func (c *call) add(k int, i int32, r *entry) {
	kr := &c.kin[k]
	size := kr.size
	if len(kr.idx) == 1 { // a single record becomes an aggregate
		size = kpl.AggregateBase(len(kr.key)) + kpl.UserRecordSize(kr.size)
	}
	size += kpl.UserRecordSize(len(r.data))
	if len(kr.key)+size > c.maxRecordBytes || c.size-kr.size+size > c.requestBytes {
		c.keys[r.key] = -1
		return
	}
	c.size += size - kr.size
	kr.size = size
	kr.idx = append(kr.idx, i)
}

// entries returns the call's records for PutRecordsInput.Records, appended
// to dst[:0]: a record's own data, or the aggregate of several.
func (c *call) entries(dst []types.PutRecordsRequestEntry, recs []entry) []types.PutRecordsRequestEntry {
	dst = dst[:0]
	var users []kpl.UserRecord
	for _, kr := range c.kin {
		data := recs[kr.idx[0]].data
		if len(kr.idx) > 1 {
			users = users[:0]
			for _, i := range kr.idx {
				users = append(users, kpl.UserRecord{PartitionKey: kr.key, Data: recs[i].data})
			}
			data = kpl.Aggregate(users)
		}
		dst = append(dst, types.PutRecordsRequestEntry{PartitionKey: aws.String(kr.key), Data: data})
	}
	return dst
}

// settle marks acked the records of the call's Kinesis records that out
// says were written, and returns how many Kinesis records failed and the
// result of the first that did.
func (c *call) settle(out *awskinesis.PutRecordsOutput, acked []bool) (failed int, first types.PutRecordsResultEntry) {
	for j, res := range out.Records {
		if res.ErrorCode != nil {
			if failed == 0 {
				first = res
			}
			failed++
			continue
		}
		for _, i := range c.kin[j].idx {
			acked[i] = true
		}
	}
	return failed, first
}
