package kpl

// This file holds the protobuf wire-format primitives the decoder and the
// encoder need: varints, tags, length-delimited fields, and skipping fields
// of every wire type.

import "encoding/binary"

// wireType is the low three bits of a protobuf field tag.
type wireType uint8

// The protobuf wire types. Types 6 and 7 are not defined and are rejected.
const (
	wireVarint     wireType = 0
	wireFixed64    wireType = 1
	wireBytes      wireType = 2
	wireStartGroup wireType = 3
	wireEndGroup   wireType = 4
	wireFixed32    wireType = 5
)

// maxFieldNumber is the largest field number protobuf allows (2^29 - 1).
const maxFieldNumber = 1<<29 - 1

// maxVarintLen is the longest encoding of a 64-bit varint.
const maxVarintLen = 10

// decoder reads protobuf fields from buf, front to back.
type decoder struct {
	buf []byte
	pos int
	// base is the offset of buf[0] in the Kinesis record's data, so errors
	// point into the bytes the caller actually has.
	base int
}

// done reports whether every byte of buf has been read.
func (d *decoder) done() bool { return d.pos >= len(d.buf) }

// offset returns the current position as an offset in the Kinesis record.
func (d *decoder) offset() int { return d.base + d.pos }

// varint reads a base-128 varint. It rejects encodings that are truncated or
// do not fit in 64 bits.
func (d *decoder) varint() (uint64, error) {
	start := d.offset()
	var v uint64
	for i := range maxVarintLen {
		if d.done() {
			return 0, malformed(start, "truncated varint")
		}
		b := d.buf[d.pos]
		d.pos++
		if i == maxVarintLen-1 && b > 1 {
			return 0, malformed(start, "varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	// Unreachable: the tenth byte is at most 1, which ends the varint.
	return 0, malformed(start, "varint overflows 64 bits")
}

// tag reads a field tag and splits it into field number and wire type.
func (d *decoder) tag() (int, wireType, error) {
	start := d.offset()
	v, err := d.varint()
	if err != nil {
		return 0, 0, err
	}
	num, wt := v>>3, wireType(v&7)
	if num == 0 || num > maxFieldNumber {
		return 0, 0, malformed(start, "invalid field number %d", num)
	}
	if wt > wireFixed32 {
		return 0, 0, malformed(start, "invalid wire type %d in field %d", wt, num)
	}
	return int(num), wt, nil
}

// bytes reads a length-delimited value. The result aliases buf and has its
// capacity clipped, so appending to it never overwrites the bytes after it.
func (d *decoder) bytes() ([]byte, error) {
	start := d.offset()
	n, err := d.varint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(d.buf)-d.pos) {
		return nil, malformed(start, "length %d runs past the end of the message (%d bytes left)", n, len(d.buf)-d.pos)
	}
	end := d.pos + int(n)
	b := d.buf[d.pos:end:end]
	d.pos = end
	return b, nil
}

// fixed skips n bytes of a fixed-width value.
func (d *decoder) fixed(n int) error {
	if len(d.buf)-d.pos < n {
		return malformed(d.offset(), "truncated %d-byte fixed value", n)
	}
	d.pos += n
	return nil
}

// maxGroupDepth is how deeply skip follows groups nested in groups, the
// default depth limit of upb, protobuf's C decoder. The KPL writes no
// groups at all; the limit keeps skip from allocating for the nesting.
const maxGroupDepth = 100

// skip skips the value of a field whose tag (num, wt) has just been read.
// Groups are skipped whole, nested up to maxGroupDepth, without recursion.
func (d *decoder) skip(num int, wt wireType) error {
	if wt != wireStartGroup {
		return d.skipScalar(num, wt)
	}
	var stack [maxGroupDepth]int // field numbers of the groups still open
	open := append(stack[:0], num)
	for len(open) > 0 {
		start := d.offset()
		if d.done() {
			return malformed(start, "group %d is not closed", open[len(open)-1])
		}
		n, t, err := d.tag()
		if err != nil {
			return err
		}
		switch t {
		case wireStartGroup:
			if len(open) == maxGroupDepth {
				return malformed(start, "groups nested more than %d deep", maxGroupDepth)
			}
			open = append(open, n)
		case wireEndGroup:
			if top := open[len(open)-1]; n != top {
				return malformed(start, "end of group %d inside group %d", n, top)
			}
			open = open[:len(open)-1]
		default:
			if err := d.skipScalar(n, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// skipScalar skips a value of any wire type but the group ones.
func (d *decoder) skipScalar(num int, wt wireType) error {
	switch wt {
	case wireVarint:
		_, err := d.varint()
		return err
	case wireFixed64:
		return d.fixed(8)
	case wireFixed32:
		return d.fixed(4)
	case wireBytes:
		_, err := d.bytes()
		return err
	default: // wireEndGroup without a matching start; tag() rejected 6 and 7.
		return malformed(d.offset(), "end of group %d that was never started", num)
	}
}

// appendTag appends the tag of field num with wire type wt.
func appendTag(b []byte, num int, wt wireType) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(wt))
}

// appendBytes appends field num as a length-delimited value.
func appendBytes(b []byte, num int, v []byte) []byte {
	b = appendTag(b, num, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendString is appendBytes for a string, without converting it.
func appendString(b []byte, num int, v string) []byte {
	b = appendTag(b, num, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// varintLen returns the number of bytes binary.AppendUvarint uses for v.
func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
