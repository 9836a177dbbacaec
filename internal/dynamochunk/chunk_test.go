package dynamochunk

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func items(chunks [][]byte) []map[string]types.AttributeValue {
	out := make([]map[string]types.AttributeValue, len(chunks))
	for i, c := range chunks {
		out[i] = map[string]types.AttributeValue{"seq": &types.AttributeValueMemberN{Value: strconv.Itoa(i + 1)},
			"data": &types.AttributeValueMemberB{Value: c}}
	}
	return out
}

func TestSplitJoin(t *testing.T) {
	for _, n := range []int{0, 1, Size - 1, Size, Size + 1, 3*Size + 7} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 31)
		}
		chunks := Split(data)
		if want := (n + Size - 1) / Size; len(chunks) != want {
			t.Errorf("Split(%d bytes): %d chunks, want %d", n, len(chunks), want)
		}
		got, _, err := Join(items(chunks), "seq", "data")
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("Join(Split(%d bytes)): %d bytes, %v", n, len(got), err)
		}
	}
}

func TestJoinRefusesDisorder(t *testing.T) {
	its := items([][]byte{[]byte("a"), []byte("b"), []byte("c")})
	its[1], its[2] = its[2], its[1]
	if _, bad, err := Join(its, "seq", "data"); err == nil || bad != 2 {
		t.Errorf("Join of chunks 1, 3, 2: bad %d, %v; want chunk 2 refused", bad, err)
	}
	delete(its[0], "data")
	if _, bad, err := Join(its, "seq", "data"); err == nil || bad != 1 {
		t.Errorf("Join of a chunk without data: bad %d, %v; want chunk 1 refused", bad, err)
	}
}
