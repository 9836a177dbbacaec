package dynamodb

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/lineage"
)

// MaxItemSize is the largest item DynamoDB stores, in bytes: 400 KB, where a
// KB is 1024 bytes, counting the UTF-8 length of every attribute name as
// well as the values ("Items" in the DynamoDB Developer Guide's
// constraints).
const MaxItemSize = 400 << 10

// ErrItemTooLarge is wrapped by the error of a batch with a put whose item,
// version attribute included, is over MaxItemSize; the error names the
// table and the item's key.
var ErrItemTooLarge = errors.New("dynamodb: item over DynamoDB's 400 KB limit")

// Write is the write of one item that the user's function makes of a
// record: a put of a whole item (Item set) or an update (Update set), never
// both. The Sink adds the version attribute and the condition; a Write must
// not use the version attribute itself.
type Write struct {
	// Key is the item's primary key: its partition key attribute and, if
	// the table has one, its sort key attribute, and nothing else.
	// Required for an update; for a put it may be left nil, and is then
	// taken from Item.
	Key map[string]types.AttributeValue
	// Item is the whole item of a put, key attributes included: it
	// replaces whatever item has its key.
	Item map[string]types.AttributeValue
	// Update is the update expression of an update, such as
	// "SET title = :t ADD hits :one" (see "Update expressions" in the
	// DynamoDB Developer Guide): it may use every clause but must not name
	// the version attribute.
	Update string
	// Names and Values are Update's expression attribute names ("#n") and
	// values (":v"). Names starting "#weir" and values starting ":weir" are
	// the Sink's.
	Names  map[string]string
	Values map[string]types.AttributeValue
}

// The Sink's expression attribute names and values of its conditions.
const (
	versionName  = "#weirVersion"
	versionValue = ":weirVersion"
	shardValue   = ":weirShard" // an origin version's shard prefix
	fenceValue   = ":weirFence" // lineageMark and the shard prefix of an origin version
	// positionValue is an origin version without its lineage, which the
	// condition compares: a write whose version was first written with
	// another lineage (none: the shard's lease was not held) is still
	// skipped as applied.
	positionValue = ":weirPosition"
	// timeCondition is the condition of a write versioned by batch time:
	// the item has no version yet (it is new, or written by something
	// else than a Sink), an older one, or a version of origin (a string:
	// the pipeline changed kind, and the item must not stay frozen). In
	// DynamoDB an order comparison with a missing attribute, or one of
	// another type, is false (not an error), so NOT >= says all three; the
	// OR of three clauses cost some 15% of the sink's writes per second on
	// dynalite (BenchmarkSinkVsLoop).
	timeCondition = "NOT " + versionName + " >= " + versionValue
	// originCondition is the condition of a write versioned by its
	// record's origin: the item has no version yet, a version by batch
	// time (a number), a version of another source shard (whose positions
	// order nothing against this shard's: see originVersion), or an older
	// position of the same shard; and the item's version does not name
	// the write's shard as an ancestor of its own (see lineageOf): a
	// descendant shard's write is never overwritten by a late one of its
	// parent, grandparent, and so on.
	// begins_with and contains of a missing attribute or a number are
	// false.
	originCondition = "NOT (begins_with(" + versionName + ", " + shardValue + ") AND " + versionName + " >= " + positionValue + ")" +
		" AND NOT contains(" + versionName + ", " + fenceValue + ")"
)

// lineageMark starts each ancestor's shard prefix in the lineage a version of
// origin ends with (see lineageOf). Neither a shard prefix nor a position
// has it (Kinesis names are letters, digits, "_", "." and "-").
const lineageMark = "<"

// ordinalDigits is the number of decimal digits a version gives the
// ordinal of a write among its batch's writes of the same item, after the
// batch time's: 13 + 9 digits fit a DynamoDB number's 38.
const ordinalDigits = 9

// version returns the version of the write of ordinal n among the writes
// of one item in the batch at time t (t >= 0, n < 10^ordinalDigits): the
// number t*10^9 + n, which orders writes by batch time, then by ordinal.
func version(t int64, n int) string {
	ord := strconv.Itoa(n)
	if t == 0 {
		return ord
	}
	return strconv.FormatInt(t, 10) + strings.Repeat("0", ordinalDigits-len(ord)) + ord
}

// originVersion returns the version of a write made of a record of origin
// o, a string: prefix, which names o's source stream and shard (each
// length-prefixed, so that no prefix is another's), then o's position in
// the shard, encoded so that DynamoDB's order of strings (by their UTF-8
// bytes) is the order of positions: the sequence number's digit count in
// three digits and its digits, then the sub-sequence number and the
// index, each as its digit count in two digits and its digits. A sequence
// number has up to 129 digits, far more than a DynamoDB number's 38.
func originVersion(o batch.Origin) (prefix, v string, err error) {
	if err := batch.ValidateSeq(o.Seq); err != nil {
		return "", "", fmt.Errorf("origin: %w", err)
	}
	if o.SubSeq < 0 || o.Index < 0 {
		return "", "", fmt.Errorf("origin: sub-sequence %d or index %d negative", o.SubSeq, o.Index)
	}
	prefix = shardPrefix(o.Stream, o.Shard)
	sub, idx := strconv.FormatInt(o.SubSeq, 10), strconv.Itoa(o.Index)
	return prefix, prefix + fmt.Sprintf("%03d", len(o.Seq)) + o.Seq + fmt.Sprintf(".%02d", len(sub)) + sub + fmt.Sprintf(".%02d", len(idx)) + idx, nil
}

// shardPrefix returns the prefix of the versions of origin of the records
// of shard of stream: each name length-prefixed, so that no prefix is
// another's.
func shardPrefix(stream, shard string) string {
	return strconv.Itoa(len(stream)) + ":" + stream + strconv.Itoa(len(shard)) + ":" + shard + "@"
}

// lineageOf returns what a version of origin of a record of shard of stream
// ends with, given the shard's ancestors, nearest first: lineageMark and
// the shard prefix of each, at most lineage.MaxAncestors (the nearest), ""
// if none. A write of an ancestor whose fence (lineageMark and its own
// prefix) the item's version contains is refused: a child shard is read
// only once its parents' records are all in completed batches, so an
// ancestor's write that comes after a descendant's is one applied already
// (a zombie's, or a batch run again), which would bring back an older
// value or count an update twice. The lineage follows the position, so it
// leaves the order of a shard's versions as it is: no position's encoding
// is a prefix of another's. A version written before lineages named more
// than parents has the same form, and is read the same way.
func lineageOf(stream string, ancestors []string) string {
	var sb strings.Builder
	for _, a := range ancestors[:min(len(ancestors), lineage.MaxAncestors)] {
		sb.WriteString(lineageMark)
		sb.WriteString(shardPrefix(stream, a))
	}
	return sb.String()
}

// op is a write ready to send: its key and its version.
type op struct {
	w       Write
	key     map[string]types.AttributeValue
	v       string // the version: a number (by batch time) or a string (by origin)
	prefix  string // an origin version's shard prefix; "" for a version by batch time
	lineage string // what an origin version written ends with (see lineageOf)
	rec     int    // the index of its record in the batch
}

// op names the call that sends o: PutItem or UpdateItem.
func (o op) op() string {
	if o.w.Item != nil {
		return "PutItem"
	}
	return "UpdateItem"
}

// check validates w against the table's key attributes and the version
// attribute, and returns the write's key.
func check(w Write, keyAttrs []string, versionAttr string) (map[string]types.AttributeValue, error) {
	put, update := w.Item != nil, w.Update != ""
	switch {
	case put && update:
		return nil, errors.New("both Item and Update set: a Write is a put (Item) or an update (Update)")
	case !put && !update:
		return nil, errors.New("neither Item nor Update set: a Write is a put (Item) or an update (Update)")
	case put && (w.Names != nil || w.Values != nil):
		return nil, errors.New("Names or Values set on a put: they are Update's")
	}
	// The values first: keyID and formatKey read them.
	for _, m := range [...]struct {
		what string
		vs   map[string]types.AttributeValue
	}{{"Key", w.Key}, {"Item", w.Item}, {"Values", w.Values}} {
		if bad := checkMap(m.vs); bad != nil {
			return nil, fmt.Errorf("%s%s: %s", m.what, bad.path, bad.problem)
		}
	}
	key := w.Key
	var itemKey map[string]types.AttributeValue // Item's key attributes
	if put {
		if _, ok := w.Item[versionAttr]; ok {
			return nil, fmt.Errorf("Item has the version attribute %q, which the Sink sets", versionAttr)
		}
		itemKey = make(map[string]types.AttributeValue, len(keyAttrs))
		for _, a := range keyAttrs {
			if v, ok := w.Item[a]; ok {
				itemKey[a] = v
			}
		}
		if key == nil {
			key = itemKey
		}
	}
	if len(key) != len(keyAttrs) {
		return nil, fmt.Errorf("key %s: must have exactly the table's key attributes %q", formatKey(key, keyAttrs), keyAttrs)
	}
	for _, a := range keyAttrs {
		if _, ok := key[a]; !ok {
			return nil, fmt.Errorf("key %s: must have exactly the table's key attributes %q", formatKey(key, keyAttrs), keyAttrs)
		}
	}
	if put && w.Key != nil {
		inItem, err1 := keyID(itemKey, keyAttrs)
		inKey, err2 := keyID(key, keyAttrs)
		if err := errors.Join(err1, err2); err != nil || inItem != inKey {
			return nil, fmt.Errorf("key %s: Item's key attributes %s differ from Key's", formatKey(key, keyAttrs), formatKey(itemKey, keyAttrs))
		}
	}
	if update {
		for n, name := range w.Names {
			if strings.HasPrefix(n, "#weir") {
				return nil, fmt.Errorf("Names has %q: names starting #weir are the Sink's", n)
			}
			if name == versionAttr {
				return nil, fmt.Errorf("Update names the version attribute %q, which the Sink sets", versionAttr)
			}
			if !utf8.ValidString(name) {
				return nil, fmt.Errorf("Names[%q]: %s", n, invalidUTF8)
			}
		}
		for v := range w.Values {
			if strings.HasPrefix(v, ":weir") {
				return nil, fmt.Errorf("Values has %q: values starting :weir are the Sink's", v)
			}
		}
	}
	return key, nil
}

// badValue is a value of a Write that the SDK cannot send: its problem,
// and its path in the map checked (such as `["m"][2]`), built as the
// check returns, so that a Write without one costs no formatting.
type badValue struct{ path, problem string }

// checkMap returns the first value of vs (a Write's Key, Item or Values,
// or a map in one) that the SDK cannot send: a nil pointer of an
// attribute value type, on which its serializer panics, or a nil value in
// a map, which it sends as no value at all and DynamoDB refuses. A nil in
// a list is left alone: the SDK leaves it out. A string that is not valid
// UTF-8, as a value or a name, is refused too: the SDK sends each invalid
// byte as U+FFFD, so two keys that differ only there are one item to
// DynamoDB, and one's write would be skipped as applied.
func checkMap(vs map[string]types.AttributeValue) *badValue {
	for name, v := range vs {
		if !utf8.ValidString(name) {
			return &badValue{path: fmt.Sprintf("[%q]", name), problem: invalidUTF8}
		}
		if bad := checkValue(v, false); bad != nil {
			bad.path = fmt.Sprintf("[%q]", name) + bad.path
			return bad
		}
	}
	return nil
}

// checkValue is checkMap's check of one value v, an element of a list if
// inList.
func checkValue(v types.AttributeValue, inList bool) *badValue {
	if v == nil {
		if inList {
			return nil
		}
		return &badValue{problem: "a nil value: give one (&types.AttributeValueMemberNULL{Value: true} for a null), or leave the attribute out"}
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return &badValue{problem: fmt.Sprintf("a nil %T, which the AWS SDK cannot send: give a value, or leave the attribute out", v)}
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if !utf8.ValidString(v.Value) {
			return &badValue{problem: invalidUTF8}
		}
	case *types.AttributeValueMemberSS:
		for i, e := range v.Value {
			if !utf8.ValidString(e) {
				return &badValue{path: fmt.Sprintf("[%d]", i), problem: invalidUTF8}
			}
		}
	case *types.AttributeValueMemberM:
		return checkMap(v.Value)
	case *types.AttributeValueMemberL:
		for i, e := range v.Value {
			if bad := checkValue(e, true); bad != nil {
				bad.path = fmt.Sprintf("[%d]", i) + bad.path
				return bad
			}
		}
	}
	return nil
}

// invalidUTF8 is the problem of a string that is not valid UTF-8.
const invalidUTF8 = "a string that is not valid UTF-8, which the AWS SDK sends with each invalid byte replaced by U+FFFD " +
	"(so strings that differ only there are one to DynamoDB): send bytes as a binary value (types.AttributeValueMemberB), " +
	"or make the string valid (strings.ToValidUTF8)"

// keyID returns the identity of a key: equal for keys DynamoDB takes for
// the same item, numbers compared as numbers ("1" and "1.0" are one key).
func keyID(key map[string]types.AttributeValue, keyAttrs []string) (string, error) {
	var sb strings.Builder
	for _, a := range keyAttrs {
		switch v := key[a].(type) {
		case *types.AttributeValueMemberS:
			sb.WriteString("S")
			sb.WriteString(strconv.Itoa(len(v.Value)))
			sb.WriteString(":")
			sb.WriteString(v.Value)
		case *types.AttributeValueMemberN:
			r, ok := new(big.Rat).SetString(v.Value)
			if !ok {
				return "", fmt.Errorf("key attribute %q: %q is not a number", a, v.Value)
			}
			s := r.RatString()
			sb.WriteString("N")
			sb.WriteString(strconv.Itoa(len(s)))
			sb.WriteString(":")
			sb.WriteString(s)
		case *types.AttributeValueMemberB:
			sb.WriteString("B")
			sb.WriteString(strconv.Itoa(len(v.Value)))
			sb.WriteString(":")
			sb.Write(v.Value)
		default:
			return "", fmt.Errorf("key attribute %q: a key is a string, number or binary, not %T", a, v)
		}
	}
	return sb.String(), nil
}

// formatKey formats a key for messages: {id: "a", n: 3}.
func formatKey(key map[string]types.AttributeValue, keyAttrs []string) string {
	names := slices.Clone(keyAttrs)
	for a := range key {
		if !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	var sb strings.Builder
	sb.WriteString("{")
	for i, a := range names {
		v, ok := key[a]
		if !ok {
			continue
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(a)
		sb.WriteString(": ")
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			sb.WriteString(strconv.Quote(v.Value))
		case *types.AttributeValueMemberN:
			sb.WriteString(v.Value)
		case *types.AttributeValueMemberB:
			fmt.Fprintf(&sb, "0x%x", v.Value)
		default:
			fmt.Fprintf(&sb, "%T", v)
		}
	}
	sb.WriteString("}")
	return sb.String()
}

// itemSize returns the size DynamoDB counts for an item: the UTF-8 length
// of each attribute name plus its value's size (see valueSize).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize returns the size of a value by the rules of "DynamoDB item
// sizes and formats" (DynamoDB Developer Guide): a string's UTF-8 bytes, a
// binary's raw bytes, a number's one byte per two significant digits plus
// one, one byte for a null or a Boolean, and for a list or a map 3 bytes
// plus one per element plus the elements' sizes (a map's element names
// counted). A set counts as its elements' sizes.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sum(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sum(v.Value, numberSize)
	case *types.AttributeValueMemberBS:
		return sum(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + valueSize(e)
		}
		return n
	}
	return 0
}

// sum returns the sum of the sizes of xs.
func sum[E any](xs []E, size func(E) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}

// numberSize is the size of a number: one byte per two significant digits
// (leading and trailing zeros trimmed), plus one.
func numberSize(s string) int {
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, mant)
	digits = strings.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}

// withVersion returns the update expression expr that also sets the
// version attribute: in expr's SET clause if it has one (an update
// expression may have each clause once), in a new one otherwise.
func withVersion(expr string) string {
	set := " SET " + versionName + " = " + versionValue
	if i := setClause(expr); i >= 0 {
		return expr[:i+3] + " " + versionName + " = " + versionValue + "," + expr[i+3:]
	}
	return expr + set
}

// setClause returns the index of the SET keyword in an update expression,
// or -1. SET is a reserved word, so it cannot be a plain attribute name:
// any word SET (in any case) that is not part of a placeholder ("#set",
// ":set") or of a longer name is the keyword.
func setClause(expr string) int {
	for i := 0; i+3 <= len(expr); {
		r, size := utf8.DecodeRuneInString(expr[i:])
		if !isWordRune(r) {
			i += size
			continue
		}
		start := i
		for i < len(expr) {
			r, size := utf8.DecodeRuneInString(expr[i:])
			if !isWordRune(r) {
				break
			}
			i += size
		}
		placeholder := start > 0 && (expr[start-1] == '#' || expr[start-1] == ':')
		if !placeholder && strings.EqualFold(expr[start:i], "SET") {
			return start
		}
	}
	return -1
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
