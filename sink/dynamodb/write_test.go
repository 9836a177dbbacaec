package dynamodb

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/lineage"
)

func TestWithVersion(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"ADD hits :one", "ADD hits :one SET #weirVersion = :weirVersion"},
		{"SET a = :a ADD hits :one", "SET #weirVersion = :weirVersion, a = :a ADD hits :one"},
		{"ADD hits :one set a = :a", "ADD hits :one set #weirVersion = :weirVersion, a = :a"},
		{"ADD #set :set SET #x = :x", "ADD #set :set SET #weirVersion = :weirVersion, #x = :x"},
		{"REMOVE settings, offset", "REMOVE settings, offset SET #weirVersion = :weirVersion"},
		{"SET\ta=:a", "SET #weirVersion = :weirVersion,\ta=:a"},
	} {
		if got := withVersion(tc.expr); got != tc.want {
			t.Errorf("withVersion(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		t    int64
		n    int
		want string
	}{
		{1_700_000_000_000, 0, "1700000000000000000000"},
		{1_700_000_000_000, 12, "1700000000000000000012"},
		{1_700_000_000_000, 999_999_999, "1700000000000999999999"},
		{1, 3, "1000000003"},
		{0, 3, "3"},
	} {
		if got := version(tc.t, tc.n); got != tc.want {
			t.Errorf("version(%d, %d) = %s, want %s", tc.t, tc.n, got, tc.want)
		}
	}
}

func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"string", map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "héllo"}}, 2 + 6},
		{"number", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "-0012.3400"}}, 1 + 2 + 1},
		{"number exponent", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "1.5E+10"}}, 1 + 1 + 1},
		{"binary", map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: []byte{1, 2, 3}}}, 1 + 3},
		{"bool, null", map[string]types.AttributeValue{"t": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "ab"}, &types.AttributeValueMemberBOOL{},
		}}}, 1 + 3 + (1 + 2) + (1 + 1)},
		{"map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"key": &types.AttributeValueMemberS{Value: "v"},
		}}}, 1 + 3 + (1 + 3 + 1)},
		{"string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
	} {
		if got := itemSize(tc.item); got != tc.want {
			t.Errorf("%s: itemSize = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	keyAttrs := []string{"pk", "sk"}
	for _, tc := range []struct {
		name    string
		w       Write
		wantErr string
	}{
		{"put, key from item", Write{Item: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b"), "x": s("c")}}, ""},
		{"update", Write{Key: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}, Update: "ADD n :one"}, ""},
		{"both", Write{Item: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}, Update: "ADD n :one"}, "both Item and Update"},
		{"neither", Write{Key: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}}, "neither Item nor Update"},
		{"put without sort key", Write{Item: map[string]types.AttributeValue{"pk": s("a")}}, `must have exactly the table's key attributes ["pk" "sk"]`},
		{"update key with extra", Write{Key: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b"), "x": s("c")}, Update: "ADD n :one"}, "must have exactly"},
		{"put key differs", Write{Key: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}, Item: map[string]types.AttributeValue{"pk": s("a"), "sk": s("c")}}, "Item's key attributes"},
		{"put sets version", Write{Item: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b"), "v": s("c")}}, `version attribute "v"`},
		{"update names version", Write{Key: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}, Update: "SET #v = :v", Names: map[string]string{"#v": "v"}}, `version attribute "v"`},
		{"update uses #weir", Write{Key: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}, Update: "SET #weirX = :x", Names: map[string]string{"#weirX": "x"}}, "#weir"},
		{"put with Values", Write{Item: map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}, Values: map[string]types.AttributeValue{":x": s("c")}}, "Update's"},
	} {
		_, err := check(tc.w, keyAttrs, "v")
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestKeyIDNumbers checks that number keys DynamoDB takes for one item have
// one identity, so that their writes are ordered and numbered together.
func TestKeyIDNumbers(t *testing.T) {
	id := func(v string) string {
		s, err := keyID(map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: v}}, []string{"k"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if id("1") != id("1.0") || id("100") != id("1E2") || id("1") == id("10") {
		t.Errorf("ids: 1 %q, 1.0 %q, 1E2 %q, 100 %q, 10 %q", id("1"), id("1.0"), id("1E2"), id("100"), id("10"))
	}
	strKey, _ := keyID(map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "1"}}, []string{"k"})
	if strKey == id("1") {
		t.Errorf("string key \"1\" and number key 1 have one identity %q", strKey)
	}
}

func TestConfigValidate(t *testing.T) {
	client := ddb.New(ddb.Options{Region: "us-east-1"}) // no call is made
	err := Config{Endpoint: "localhost:8000", Concurrency: -1, Client: client, AWS: &aws.Config{}}.validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("error %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"Endpoint", "Table empty", "Concurrency -1", "Client is set with AWS and Endpoint"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// Origin versions of one shard order as their positions do (sequence
// numbers as numbers, then sub-sequence, then index), in DynamoDB's order
// of strings, and every one starts with its shard's prefix, which no other
// shard's version starts with.
func TestOriginVersion(t *testing.T) {
	ordered := []batch.Origin{
		{Seq: "0"}, {Seq: "9"}, {Seq: "9", SubSeq: 1}, {Seq: "9", SubSeq: 1, Index: 2}, {Seq: "9", SubSeq: 1, Index: 10},
		{Seq: "9", SubSeq: 10}, {Seq: "10"}, {Seq: "99"}, {Seq: "49590338271490256608559692538361571095921575989136588898"},
		{Seq: "1" + strings.Repeat("0", batch.MaxSeqDigits-1)},
	}
	prev := ""
	for i, o := range ordered {
		o.Stream, o.Shard = "s", "shardId-000000000001"
		prefix, v, err := originVersion(o)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v, prefix) || prefix != "1:s20:shardId-000000000001@" {
			t.Errorf("%+v: version %q, prefix %q", o, v, prefix)
		}
		if i > 0 && v <= prev { // Go compares strings bytewise, as DynamoDB does
			t.Errorf("%+v: version %q not after %q", o, v, prev)
		}
		prev = v
	}
	// A shard whose name extends another's, or a stream and shard cut
	// elsewhere, get other prefixes.
	p1, _, _ := originVersion(batch.Origin{Stream: "s", Shard: "a", Seq: "1"})
	_, v2, _ := originVersion(batch.Origin{Stream: "s", Shard: "a1", Seq: "1"})
	_, v3, _ := originVersion(batch.Origin{Stream: "s1", Shard: "a", Seq: "1"})
	for _, v := range []string{v2, v3} {
		if strings.HasPrefix(v, p1) {
			t.Errorf("version %q starts with the prefix %q of another shard", v, p1)
		}
	}
	for _, o := range []batch.Origin{{Seq: "01"}, {Seq: "x"}, {Seq: "1", SubSeq: -1}, {Seq: "1", Index: -1}} {
		if _, _, err := originVersion(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// A version's lineage names exactly its shard's parents, and leaves the
// order of the shard's versions, compared as the condition does (the
// item's version, lineage included, against a bare position), as it is.
func TestLineage(t *testing.T) {
	l := lineageOf("s", []string{"shardId-000000000000", "shardId-000000000001"})
	for _, tc := range []struct {
		stream, shard string
		parent        bool
	}{
		{"s", "shardId-000000000000", true}, {"s", "shardId-000000000001", true},
		{"s", "shardId-00000000000", false}, {"s", "hardId-000000000000", false},
		{"s1", "shardId-000000000000", false}, {"t", "shardId-000000000001", false},
	} {
		_, v, _ := originVersion(batch.Origin{Stream: "s", Shard: "shardId-000000000002", Seq: "5"})
		if got := strings.Contains(v+l, lineageMark+shardPrefix(tc.stream, tc.shard)); got != tc.parent {
			t.Errorf("version %q names %s/%s as a parent: %v, want %v", v+l, tc.stream, tc.shard, got, tc.parent)
		}
	}
	if lineageOf("s", nil) != "" {
		t.Errorf("lineage without parents: %q", lineageOf("s", nil))
	}
	many := make([]string, lineage.MaxAncestors+1)
	for i := range many {
		many[i] = fmt.Sprintf("shardId-%012d", i)
	}
	if got, want := strings.Count(lineageOf("s", many), lineageMark), lineage.MaxAncestors; got != want {
		t.Errorf("lineage of %d ancestors names %d, want the nearest %d", len(many), got, want)
	}
	if strings.Contains(lineageOf("s", many), lineageMark+shardPrefix("s", many[lineage.MaxAncestors])) {
		t.Errorf("lineage of %d ancestors names the farthest", len(many))
	}
	o := batch.Origin{Stream: "s", Shard: "c", Seq: "10"}
	_, v10, _ := originVersion(o)
	o.Seq, o.Index = "9", 3
	_, v9, _ := originVersion(o)
	o.Seq, o.Index = "10", 1
	_, v10i, _ := originVersion(o)
	for _, stored := range []string{v10, v10 + l} {
		if !(stored >= v10) || !(stored >= v9) || stored >= v10i {
			t.Errorf("stored %q: against %q, %q, %q: the order of positions changed", stored, v9, v10, v10i)
		}
	}
}
