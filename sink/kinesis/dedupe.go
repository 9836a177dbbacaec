package kinesis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/weirstream/weir/internal/origin"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// Deduplicate returns the records of s, read from a stream this package
// wrote with Config.Origin set, with the copies a replayed batch or a
// retried PutRecords left (and, for records written with stream.Origins,
// those of another worker of the writing fleet) dropped and the origin tags
// taken off: each kept record's Data is its payload. Records without a tag pass through unchanged. Order is kept:
// the records of a shard come out in the shard's order.
//
// The filter's state is a stateful operator's (stream.MapWithState, keyed
// by the record's ShardID): with stream.Config.Recovery it is snapshotted
// and replayed as any state, so a batch recomputed after a crash drops
// exactly the records it dropped the first time, and s → Deduplicate →
// an exactly-once output delivers each record the writer wrote once.
//
// Its state is kept by shard, so it is accepted on a receiver with leases
// (it is declared stream.PartitionedByKey; the stateful operators after it
// are checked as any). On a receiver with leases its state is kept per
// shard and moves with the shard's lease (stream.PartitionedBy, DESIGN.md,
// "On a fleet: state per shard"), without Config.Recovery; a reshard's
// child starts from its parents' filters, merged, so a copy of a record
// written to a parent and again to the child is dropped.
func Deduplicate(s *stream.Stream[source.Record]) *stream.Stream[source.Record] {
	byShard := stream.Map(s, func(r source.Record) stream.Pair[string, source.Record] {
		return stream.Pair[string, source.Record]{Key: r.ShardID, Value: r}
	})
	warned := map[string]bool{} // shards whose malformed tag was logged; f runs on one goroutine
	kept, _ := stream.MapWithState(byShard, func(shard string, r source.Record, st *stream.State[*origin.Filter]) (source.Record, bool) {
		if !st.Exists() {
			st.Update(origin.NewFilter(0))
		}
		payload, keep, err := filter(st.Get(), r.Data)
		if err != nil {
			if !warned[shard] {
				warned[shard] = true
				slog.Warn("sink/kinesis: Deduplicate passes a record with a malformed origin tag through unchanged",
					"shard", shard, "sequence", r.SequenceNumber, "err", err)
			}
			return r, true
		}
		r.Data = payload
		return r, keep
	}, stream.StateCodec[*origin.Filter](filterCodec{}), stream.PartitionedByKey())
	return kept
}

// filter is Deduplicate's one use of the origin tag: whether f keeps the
// record data holds, and its payload. Untagged data is kept as it is.
func filter(f *origin.Filter, data []byte) (payload []byte, keep bool, err error) {
	tag, payload, ok, err := origin.Decode(data)
	if err != nil || !ok {
		return data, true, err
	}
	return payload, f.Keep(tag), nil
}

// filterCodec encodes Deduplicate's states for snapshots: each filter's
// MarshalBinary, length first; a nil filter as length 0.
type filterCodec struct{}

var errFilterState = errors.New("sink/kinesis: Deduplicate state cut short")

func (filterCodec) Encode(fs []*origin.Filter) ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(len(fs)))
	for _, f := range fs {
		if f == nil {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		state, err := f.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(state)))
		b = append(b, state...)
	}
	return b, nil
}

func (filterCodec) Decode(data []byte) ([]*origin.Filter, error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)) {
		return nil, errFilterState
	}
	data = data[k:]
	fs := make([]*origin.Filter, n)
	for i := range fs {
		l, k := binary.Uvarint(data)
		if k <= 0 || l > uint64(len(data)-k) {
			return nil, errFilterState
		}
		state := data[k : k+int(l)]
		data = data[k+int(l):]
		if l == 0 {
			continue
		}
		fs[i] = origin.NewFilter(0)
		if err := fs[i].UnmarshalBinary(state); err != nil {
			return nil, fmt.Errorf("sink/kinesis: Deduplicate state %d: %w", i, err)
		}
	}
	if len(data) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the end", errFilterState, len(data))
	}
	return fs, nil
}
