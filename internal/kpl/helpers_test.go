package kpl

import (
	"crypto/md5"
	"encoding/binary"
)

// This file builds protobuf messages by hand for the tests, independently of
// the encoder under test: every helper writes exactly the bytes the protobuf
// encoding rules give, one field at a time.

// pb concatenates encoded fields into one message body.
func pb(fields ...[]byte) []byte {
	var b []byte
	for _, f := range fields {
		b = append(b, f...)
	}
	return b
}

// vfield encodes field num as a varint.
func vfield(num int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(nil, num, wireVarint), v)
}

// bfield encodes field num as a length-delimited value.
func bfield(num int, v []byte) []byte { return appendBytes(nil, num, v) }

// sfield is bfield for a string.
func sfield(num int, v string) []byte { return bfield(num, []byte(v)) }

// fixed64field encodes field num as a little-endian fixed64.
func fixed64field(num int, v uint64) []byte {
	b := appendTag(nil, num, wireFixed64)
	for i := range 8 {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// fixed32field encodes field num as a little-endian fixed32.
func fixed32field(num int, v uint32) []byte {
	b := appendTag(nil, num, wireFixed32)
	for i := range 4 {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// group encodes field num as a group holding the given fields.
func group(num int, fields ...[]byte) []byte {
	b := appendTag(nil, num, wireStartGroup)
	b = append(b, pb(fields...)...)
	return appendTag(b, num, wireEndGroup)
}

// frame wraps a protobuf body into an aggregated record: magic, body, and
// the body's correct MD5.
func frame(body []byte) []byte {
	out := append([]byte(magic), body...)
	sum := md5.Sum(body)
	return append(out, sum[:]...)
}
