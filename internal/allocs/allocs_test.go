package allocs

import "testing"

var sink []byte

func TestBytes(t *testing.T) {
	if got := Bytes(func() { sink = make([]byte, 1<<20) }); got < 1<<20 {
		t.Errorf("Bytes of a 1 MiB allocation = %d, want at least %d", got, 1<<20)
	}
}
