package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// durationType is written in seconds by snapshotJSON.
var durationType = reflect.TypeFor[time.Duration]()

// snapshotJSON returns v (a metrics.Snapshot) as indented JSON, as
// encoding/json writes it but for every time.Duration, written as a number
// of seconds (1.5, not 1500000000 nanoseconds), the unit Prometheus and
// most tools use.
func snapshotJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := appendJSON(&buf, reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// appendJSON writes v to buf: structs by their exported fields in order,
// maps by sorted keys, durations in seconds, anything else as
// encoding/json writes it.
func appendJSON(buf *bytes.Buffer, v reflect.Value) error {
	if v.Type() == durationType {
		buf.WriteString(strconv.FormatFloat(time.Duration(v.Int()).Seconds(), 'f', -1, 64))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		return appendJSON(buf, v.Elem())
	case reflect.Struct:
		if _, ok := v.Interface().(json.Marshaler); ok {
			break // time.Time
		}
		buf.WriteByte('{')
		first := true
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			buf.WriteString(strconv.Quote(f.Name) + ":")
			if err := appendJSON(buf, v.Field(i)); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case reflect.Map:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		keys := v.MapKeys()
		name := func(k reflect.Value) string { return fmt.Sprint(k.Interface()) }
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(name(a), name(b)) })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			key, err := json.Marshal(name(k))
			if err != nil {
				return err
			}
			buf.Write(key)
			buf.WriteByte(':')
			if err := appendJSON(buf, v.MapIndex(k)); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendJSON(buf, v.Index(i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}
