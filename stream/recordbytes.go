package stream

import "reflect"

// recordSizer estimates the memory the records of a []T hold, for the
// byte bound of the recomputation of recovered blocks (see prefetcher): the
// size of each T, plus the bytes of the strings and byte slices it holds,
// directly, in nested structs and arrays, or behind a pointer (one level of
// pointers, which also stops recursive types). Maps, interfaces and other
// slices count their header only, and a byte slice its length, not its
// capacity (the records of a KPL aggregate share its buffer). weir's
// Kinesis record counts as its receiver's byte budget counts it, plus its
// shard ID. A nil sizer counts T's size only.
type recordSizer func(v reflect.Value) int64

// sizerOf returns the sizer of the variable part of t's values (nil if t
// holds no string or byte slice the sizer follows).
func sizerOf(t reflect.Type, pointers int) recordSizer {
	switch t.Kind() {
	case reflect.String:
		return func(v reflect.Value) int64 { return int64(v.Len()) }
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return func(v reflect.Value) int64 { return int64(v.Len()) }
		}
	case reflect.Array:
		if elem := sizerOf(t.Elem(), pointers); elem != nil && t.Len() > 0 {
			return func(v reflect.Value) int64 {
				n := int64(0)
				for i := range v.Len() {
					n += elem(v.Index(i))
				}
				return n
			}
		}
	case reflect.Struct:
		type field struct {
			i    int
			size recordSizer
		}
		var fields []field
		for i := range t.NumField() {
			if f := sizerOf(t.Field(i).Type, pointers); f != nil {
				fields = append(fields, field{i, f})
			}
		}
		if len(fields) > 0 {
			return func(v reflect.Value) int64 {
				n := int64(0)
				for _, f := range fields {
					n += f.size(v.Field(f.i))
				}
				return n
			}
		}
	case reflect.Pointer:
		if pointers > 0 {
			return nil
		}
		elem, size := sizerOf(t.Elem(), pointers+1), int64(t.Elem().Size())
		return func(v reflect.Value) int64 {
			if v.IsNil() {
				return 0
			}
			if elem == nil {
				return size
			}
			return size + elem(v.Elem())
		}
	}
	return nil
}

// bytesOf returns the estimated memory of recs (see recordSizer).
func bytesOf[T any](recs []T, size recordSizer) int64 {
	n := int64(len(recs)) * int64(reflect.TypeFor[T]().Size())
	if size == nil {
		return n
	}
	v := reflect.ValueOf(recs)
	for i := range len(recs) {
		n += size(v.Index(i))
	}
	return n
}
