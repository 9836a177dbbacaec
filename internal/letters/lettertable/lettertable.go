// Package lettertable is the item format of a DynamoDB dead-letter table
// (sink/deadletter/dynamodb), shared by the store, which writes and reads
// it, and weir deadletters, which reads it and keeps the replay state of
// each letter on its item.
package lettertable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/letters"
	"github.com/weirstream/weir/stream"
)

// The table's key attributes.
const (
	HashKey  = "batch"
	RangeKey = "index"
)

// indexAttr is the attribute of a letter's Index. Items written before it
// existed have none: their sort key is the Index.
const indexAttr = "batchIndex"

// ReplayAttr is the attribute of a letter's item in which weir deadletters
// replay keeps the letter's replay state.
const ReplayAttr = "replay"

// Attrs returns the attributes a letter's item may have besides its key
// (see Item), ReplayAttr included; the version attribute of the sink
// writing the items must be none of them.
func Attrs() []string {
	return []string{indexAttr, "time", "output", "offset", "range", "record", "outputName", "encoding", "err", "panic", "stack", ReplayAttr}
}

// Keys returns the keys of the items of ls, the letters of one
// Quarantine, written by the writer named worker: the Run of a pipeline
// without a recovery log, the worker of a fleet, or "" (a pipeline with a
// log reading its shards alone). A letter read from a source's shard
// (Range.First set) is keyed by what names its source record whichever
// worker reads it: "batch" is "<output>:<length of stream>:<stream>/<shard>/<first>"
// (the output's index, the range's stream, shard and first sequence
// number) and "index" its Offset, unless another letter of ls names the
// same source record (the records a FlatMap made of one, quarantined by a
// ForEachBatch with origins): those are keyed as letters without a range,
// so that each is kept. Another letter is keyed by its batch
// and what it holds: "batch" is "<batch time>-<output>/<fingerprint>"
// (the batch time in milliseconds; the fingerprint a hash of its range,
// offset, encoding and record, see fingerprint), followed by "/" and
// worker if worker is not "", and "index" the number of the letters
// before it in ls with the same "batch" (0 but for letters of equal
// records). A batch recomputed after a crash that quarantines some of the
// same records as its first attempt and others (a flaky downstream) thus
// gives the same records the first attempt's keys and the others keys of
// their own: keyed by Index, the others had the keys of the first
// attempt's letters and were skipped as already applied, lost. The two
// forms never meet: only the first has a ":". Items of v0.4.0 keyed a
// letter of the second form by "<batch time>-<output>", then its worker,
// and its Index; those of v0.3.0 keyed every letter so, without worker.
func Keys(ls []stream.DeadLetter, worker string) []map[string]types.AttributeValue {
	type source struct {
		batch  string
		offset int
	}
	sources := make([]source, len(ls))
	named := make(map[source]int) // letters of ls naming each source record
	for i, l := range ls {
		if r := l.Range; r.First != "" {
			sources[i] = source{fmt.Sprintf("%d:%d:%s/%s/%s", l.Output, len(r.Stream), r.Stream, r.Shard, r.First), l.Offset}
			named[sources[i]]++
		}
	}
	keys := make([]map[string]types.AttributeValue, len(ls))
	seen := make(map[string]int)
	for i, l := range ls {
		if src := sources[i]; src.batch != "" && named[src] == 1 {
			keys[i] = map[string]types.AttributeValue{
				HashKey:  &types.AttributeValueMemberS{Value: src.batch},
				RangeKey: num(src.offset),
			}
			continue
		}
		b := fmt.Sprintf("%d-%d/%s", int64(l.Time), l.Output, fingerprint(l))
		if worker != "" {
			b += "/" + worker
		}
		keys[i] = map[string]types.AttributeValue{HashKey: &types.AttributeValueMemberS{Value: b}, RangeKey: num(seen[b])}
		seen[b]++
	}
	return keys
}

// BySource reports whether key, one Keys returned, names its letter's
// source record, the same whichever worker writes it, rather than its
// batch and record.
func BySource(key map[string]types.AttributeValue) bool {
	return strings.Contains(S(key, HashKey), ":")
}

// fingerprint returns a name of what letter l holds (letters.Fingerprint).
// Its Index is left out, as a recomputed batch that quarantines fewer or
// other records numbers them otherwise.
func fingerprint(l stream.DeadLetter) string { return letters.Fingerprint(false, l) }

// ID names the letter of the item of key: "<batch>-<index>", its key
// attributes' values.
func ID(key map[string]types.AttributeValue) string {
	return S(key, HashKey) + "-" + formatN(key[RangeKey])
}

// Item returns letter l's item of key (see Keys): the key and the
// letter's fields as attributes of the names of their JSON (see
// sink/deadletter/dynamodb's Table), but for Index, in "batchIndex"
// ("index" being the sort key's).
func Item(l stream.DeadLetter, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	it := make(map[string]types.AttributeValue, len(key)+14)
	maps.Copy(it, key)
	it[indexAttr] = num(l.Index)
	it["time"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(l.Time), 10)}
	it["output"] = num(l.Output)
	it["offset"] = num(l.Offset)
	r := map[string]types.AttributeValue{"count": num(l.Range.Count)}
	putS(r, "stream", l.Range.Stream)
	putS(r, "shard", l.Range.Shard)
	putS(r, "first", l.Range.First)
	putS(r, "last", l.Range.Last)
	it["range"] = &types.AttributeValueMemberM{Value: r}
	if len(l.Record) > 0 {
		it["record"] = &types.AttributeValueMemberB{Value: l.Record}
	}
	putS(it, "outputName", l.OutputName)
	putS(it, "encoding", l.Encoding)
	putS(it, "err", l.Err)
	putS(it, "panic", l.Panic)
	putS(it, "stack", l.Stack)
	return it
}

func num(n int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(n)} }

// putS sets m[name] to the string s, unless s is empty.
func putS(m map[string]types.AttributeValue, name, s string) {
	if s != "" {
		m[name] = &types.AttributeValueMemberS{Value: s}
	}
}

// Letter returns the letter an item holds.
func Letter(it map[string]types.AttributeValue) (stream.DeadLetter, error) {
	var l stream.DeadLetter
	var errs []error
	getN := func(m map[string]types.AttributeValue, name string, dst *int) {
		v, ok := m[name].(*types.AttributeValueMemberN)
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %q missing or not a number", name))
			return
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", name, err))
		}
		*dst = int(n)
	}
	var t int
	getN(it, "time", &t)
	l.Time = batch.Time(t)
	getN(it, "output", &l.Output)
	if _, ok := it[indexAttr]; ok {
		getN(it, indexAttr, &l.Index)
	} else {
		getN(it, RangeKey, &l.Index)
	}
	getN(it, "offset", &l.Offset)
	if r, ok := it["range"].(*types.AttributeValueMemberM); ok {
		l.Range = batch.SeqRange{Stream: S(r.Value, "stream"), Shard: S(r.Value, "shard"), First: S(r.Value, "first"), Last: S(r.Value, "last")}
		getN(r.Value, "count", &l.Range.Count)
	}
	if b, ok := it["record"].(*types.AttributeValueMemberB); ok {
		l.Record = b.Value
	}
	l.OutputName, l.Encoding = S(it, "outputName"), S(it, "encoding")
	l.Err, l.Panic, l.Stack = S(it, "err"), S(it, "panic"), S(it, "stack")
	if err := errors.Join(errs...); err != nil {
		return l, fmt.Errorf("item %s/%s: not a dead letter: %w", S(it, HashKey), formatN(it[RangeKey]), err)
	}
	return l, nil
}

// S returns the string attribute name of m, or "" if it has none.
func S(m map[string]types.AttributeValue, name string) string {
	v, _ := m[name].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

// formatN formats a number attribute for messages.
func formatN(v types.AttributeValue) string {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return "?"
}

// Scanner reads a table: *dynamodb.Client is one.
type Scanner interface {
	Scan(ctx context.Context, in *ddb.ScanInput, optFns ...func(*ddb.Options)) (*ddb.ScanOutput, error)
}

// Entry is a letter of a table and the item that holds it.
type Entry struct {
	// ID names the letter (see ID), Key is its item's key.
	ID     string
	Key    map[string]types.AttributeValue
	Letter stream.DeadLetter
	Item   map[string]types.AttributeValue
}

// Scan returns every letter of table, by batch time, then output, then
// Index, then ID (two workers' letters may share the first three), read
// with a strongly consistent Scan.
func Scan(ctx context.Context, c Scanner, table string) ([]Entry, error) {
	var all []Entry
	in := &ddb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := c.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("deadletter table %s: scan: %w", table, err)
		}
		for _, it := range out.Items {
			l, err := Letter(it)
			if err != nil {
				return nil, fmt.Errorf("deadletter table %s: %w", table, err)
			}
			key := map[string]types.AttributeValue{HashKey: it[HashKey], RangeKey: it[RangeKey]}
			all = append(all, Entry{ID: ID(key), Key: key, Letter: l, Item: it})
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	slices.SortFunc(all, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Letter.Time, b.Letter.Time), cmp.Compare(a.Letter.Output, b.Letter.Output), cmp.Compare(a.Letter.Index, b.Letter.Index), cmp.Compare(a.ID, b.ID))
	})
	return all, nil
}
