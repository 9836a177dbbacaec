package repartition

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/hashkey"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/internal/panics"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// hashedKeyPrefix starts the partition key that stands for an encoded key
// Kinesis would refuse as one.
const hashedKeyPrefix = "sha256:"

// maxRecordBytes is the largest record Kinesis takes, data and partition
// key together: 1 MiB, every stream's maximum record size unless raised.
// ByKey's sink writes records of at most this.
const maxRecordBytes = 1 << 20

// recordLimit is the most bytes encode lets a record's data and partition
// key take: maxRecordBytes less the most an origin tag adds (the tag is
// known only as the batch is written, and encode must refuse the same
// records whatever their tags). A variable only so that a test can raise
// it, to meet sink/kinesis's own refusal.
var recordLimit = maxRecordBytes - origin.MaxOverhead

// errRecord is wrapped by the error that fails a batch whose record cannot
// be encoded, or read back.
var errRecord = errors.New("repartition: bad record")

// codec encodes a record's key and value into the data of its Kinesis
// record: the key's length (uvarint), the key, the value.
type codec[K comparable, V any] struct {
	key   stream.Codec[K]
	value stream.Codec[V]
}

// encoded is a record ready to be written, or the error that prevents it.
type encoded struct {
	partitionKey string
	data         []byte
	err          error
}

// encode encodes p; a codec's error is kept in the result, so that the
// writing output fails its batch with it.
func (c codec[K, V]) encode(p stream.Pair[K, V]) encoded {
	k, err := safely(func() ([]byte, error) { return c.key.Encode([]K{p.Key}) })
	if err != nil {
		return encoded{err: fmt.Errorf("%w: KeyCodec: key %v: %w", errRecord, p.Key, err)}
	}
	if err := c.sameAfterDecode(k); err != nil {
		return encoded{err: fmt.Errorf("%w: KeyCodec: key %q: %w", errRecord, fmt.Sprint(p.Key), err)}
	}
	v, err := safely(func() ([]byte, error) { return c.value.Encode([]V{p.Value}) })
	if err != nil {
		return encoded{err: fmt.Errorf("%w: ValueCodec: value of key %v: %w", errRecord, p.Key, err)}
	}
	data := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(k)+len(v)), uint64(len(k)))
	data = append(append(data, k...), v...)
	pk := partitionKey(k)
	if size := len(pk) + len(data); size > recordLimit {
		// Refused here, not by the sink: so it is a record ByKey cannot
		// carry, which Config.DeadLetters catches (the unencodable output
		// finds it again with encode), and the same at every try.
		return encoded{err: fmt.Errorf("%w: key %s: its record is %d bytes (key %d and value %d encoded, %d of framing, partition key %d), "+
			"more than the %d ByKey can write: Kinesis takes records of at most %d bytes (1 MiB), data and partition key, "+
			"and ByKey's origin tag takes up to %d of them; make the value or key smaller (split it into several records), or drop such records before ByKey",
			errRecord, shortKey(p.Key), size, len(k), len(v), len(data)-len(k)-len(v), len(pk), recordLimit, maxRecordBytes, origin.MaxOverhead)}
	}
	return encoded{partitionKey: pk, data: data}
}

// shortKey returns k as an error names it: the first 64 bytes of it
// quoted (less the part of a character cut there), and its length when it
// is longer, since a key may be what makes a record too large to write.
func shortKey[K any](k K) string {
	const most = 64
	s := fmt.Sprintf("%q", fmt.Sprint(k))
	if len(s) <= most {
		return s
	}
	// Cut at a character's start: a key's text is valid UTF-8 (%q
	// escapes the bytes that are not).
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(fmt.Sprint(k)))
}

// sameAfterDecode returns an error unless k, an encoded key, decodes to a
// key that encodes to k again. The reading side places a record by its
// decoded key's encoding (partitionKeyOf): a key whose encoding changes
// after one decode (a string that is not valid UTF-8, which JSONCodec
// reads back with U+FFFD) would be written to one shard's range and placed
// in another's, where on a fleet no worker counts it; and two such keys
// could become one.
func (c codec[K, V]) sameAfterDecode(k []byte) error {
	ks, err := safely(func() ([]K, error) { return c.key.Decode(k) })
	if err != nil || len(ks) != 1 {
		return fmt.Errorf("its encoding does not decode to one key (%d keys): %v", len(ks), err)
	}
	again, err := safely(func() ([]byte, error) { return c.key.Encode(ks) })
	if err != nil {
		return fmt.Errorf("its decoded key does not encode: %w", err)
	}
	if !bytes.Equal(again, k) {
		return fmt.Errorf("its codec does not give it back the same: it encodes to %q, and decoded and encoded again to %q, "+
			"so its records would be placed by another partition key than they are written with (a string key that is not valid UTF-8, "+
			"with JSONCodec: make keys valid UTF-8, strings.ToValidUTF8, or give a KeyCodec that keeps them)", k, again)
	}
	return nil
}

// partitionKey returns the partition key of a record whose key encodes to
// k: k itself when Kinesis takes it as one (1 to 256 characters of valid
// UTF-8, counted in UTF-16 code units as Kinesis does), else its SHA-256.
func partitionKey(k []byte) string {
	if len(k) > 0 && utf8.Valid(k) && hashkey.PartitionKeyLen(string(k)) <= hashkey.MaxPartitionKeyLen {
		return string(k)
	}
	sum := sha256.Sum256(k)
	return hashedKeyPrefix + hex.EncodeToString(sum[:])
}

// partitionKeyOf returns the partition key the records of key k are
// written with ("" if the key cannot be encoded: no record of it is).
func (c codec[K, V]) partitionKeyOf(k K) string {
	b, err := safely(func() ([]byte, error) { return c.key.Encode([]K{k}) })
	if err != nil {
		return ""
	}
	return partitionKey(b)
}

// decode returns the pair whose record's payload is data.
func (c codec[K, V]) decode(data []byte) (stream.Pair[K, V], error) {
	var p stream.Pair[K, V]
	n, w := binary.Uvarint(data)
	if w <= 0 || n > uint64(len(data)-w) {
		return p, fmt.Errorf("%w: the key's length is cut short or too long", errRecord)
	}
	ks, err := safely(func() ([]K, error) { return c.key.Decode(data[w : w+int(n)]) })
	if err != nil || len(ks) != 1 {
		return p, fmt.Errorf("%w: KeyCodec: %d keys decoded, want 1: %v", errRecord, len(ks), err)
	}
	vs, err := safely(func() ([]V, error) { return c.value.Decode(data[w+int(n):]) })
	if err != nil || len(vs) != 1 {
		return p, fmt.Errorf("%w: ValueCodec: %d values decoded, want 1: %v", errRecord, len(vs), err)
	}
	return stream.Pair[K, V]{Key: ks[0], Value: vs[0]}, nil
}

// safely calls f, a codec's Encode or Decode (a user's), and turns a
// panic in it into an error naming the panic's value and the function
// that panicked: a record that makes a codec panic is one ByKey cannot
// carry, as one the codec refuses, and is quarantined with
// Config.DeadLetters. Uncaught, the panic failed the batch as a whole,
// which no quarantine isolates.
func safely[R any](f func() (R, error)) (R, error) {
	r, err := panics.Call1(f)
	if pe, ok := err.(*panics.Error); ok {
		site := ""
		if pe.Site != "" {
			site = ", in " + pe.Site
		}
		err = fmt.Errorf("panic: %v%s", pe.Value, site)
	}
	return r, err
}

// decodeBatch is the reading side's last step: the pairs of b's records
// (whose tags were stripped), part by part, read from the stream name. A
// record that cannot be decoded (not written by this package, or with
// other codecs) fails the batch, unless quarantine is set: it is left out,
// and an output of its own quarantines it (see ByKey).
func (c codec[K, V]) decodeBatch(name string, b *batch.Batch[source.Record], quarantine bool) (*batch.Batch[stream.Pair[K, V]], error) {
	parts := make([][]stream.Pair[K, V], 0, len(b.Parts()))
	for _, part := range b.Parts() {
		out := make([]stream.Pair[K, V], 0, len(part))
		for i := range part {
			p, err := c.decode(part[i].Data)
			if err != nil {
				if quarantine {
					continue
				}
				return nil, fmt.Errorf("%w: set repartition.Config.DeadLetters to send the records ByKey cannot read to dead letters and go on, "+
					"or fix the codecs (the record is read again at every start until its batch completes)", readError(name, part[i], err))
			}
			out = append(out, p)
		}
		parts = append(parts, out)
	}
	return batch.Derive(b, parts...), nil
}

// readError is the error of record r, read from the stream name, that did
// not decode with err.
func readError(name string, r source.Record, err error) error {
	return fmt.Errorf("repartition: stream %s, shard %s, record of sequence number %s, sub-sequence %d: %w",
		name, r.ShardID, r.SequenceNumber, r.SubSequenceNumber, err)
}
