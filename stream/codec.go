package stream

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Codec encodes the values of type T a stateful operator keeps (keys,
// states, windowed values) into the snapshots it takes with a recovery log
// (see Config.StateSnapshotInterval), and decodes them back. A Codec
// encodes a whole slice at once, so that per-snapshot costs (gob's type
// descriptions, a buffer) are paid once per snapshot, not once per value.
// Decode must return the values Encode was given, in order. Implementations
// must be safe for use by one goroutine at a time. A panic in Encode or
// Decode is taken as their error: Run refuses to start, or fails at the
// snapshot or restore, naming the operator; the process goes on.
type Codec[T any] interface {
	Encode(values []T) ([]byte, error)
	Decode(data []byte) ([]T, error)
}

// GobCodec returns the Codec that encodes with encoding/gob: the default of
// every stateful operator for every type it keeps. It handles the ordinary
// Go values: numbers, strings, structs of exported fields, slices, arrays,
// maps (of any key type gob encodes) and pointers to them, nil ones
// included. It refuses channels, functions and structs without exported
// fields, and an interface-typed value whose concrete type was not
// registered with gob.Register. As gob does, it drops unexported fields and
// flattens pointers: a pointer to a zero value comes back nil. A type that
// implements gob.GobEncoder or encoding.BinaryMarshaler encodes itself.
func GobCodec[T any]() Codec[T] { return gobCodec[T]{} }

type gobCodec[T any] struct{}

// gobItem carries one value: gob refuses a nil pointer or interface as a
// slice element, but omits it as a struct field.
type gobItem[T any] struct{ V T }

func (gobCodec[T]) Encode(values []T) ([]byte, error) {
	items := make([]gobItem[T], len(values))
	for i, v := range values {
		items[i].V = v
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(items); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (gobCodec[T]) Decode(data []byte) ([]T, error) {
	var items []gobItem[T]
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&items); err != nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = it.V
	}
	return out, nil
}

// JSONCodec returns a Codec that encodes with encoding/json: for types that
// define their JSON form (json.Marshaler, struct tags) or must stay readable.
// Beware that JSON decodes a number held in an interface as float64, and
// that a map key must be a string, an integer or an encoding.TextMarshaler.
func JSONCodec[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(values []T) ([]byte, error) { return json.Marshal(values) }

func (jsonCodec[T]) Decode(data []byte) ([]T, error) {
	var out []T
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// StateCodec is an option of the stateful operators (UpdateStateByKey,
// MapWithState, Window, ReduceByKeyAndWindow): the operator encodes every
// value of type T it keeps with c instead of GobCodec, for example
//
//	stream.UpdateStateByKey(pairs, update, stream.StateCodec[Session](sessionCodec{}))
//
// for a state type gob cannot encode. Several StateCodec options may be
// given, for different types (such as the key type and the state type); a
// codec for a type the operator does not keep makes Run refuse to start.
func StateCodec[T any](c Codec[T]) Option {
	var given any = c
	if c == nil || nilPointer(c) {
		given = nilCodec{reflect.TypeFor[T]()} // refused by codecSet.unused
	}
	return func(o *options) { o.codecs, o.given = append(o.codecs, given), o.given|optStateCodec }
}

// nilCodec stands for a nil codec given to StateCodec for type t.
type nilCodec struct{ t reflect.Type }

// codecSet picks the codecs of a stateful operator from its options and
// remembers which were used, so that a codec of a type the operator does
// not keep is reported.
type codecSet struct {
	given []any
	used  []bool
}

func newCodecSet(o options) *codecSet {
	return &codecSet{given: o.codecs, used: make([]bool, len(o.codecs))}
}

// codecFor returns the Codec[T] given among cs's options, or GobCodec.
func codecFor[T any](cs *codecSet) Codec[T] {
	for i, c := range cs.given {
		if c, ok := c.(Codec[T]); ok {
			cs.used[i] = true
			return c
		}
	}
	return GobCodec[T]()
}

// unused records a graph error for every codec given to op and not used.
func (cs *codecSet) unused(p *Pipeline, op string, parent *node) {
	for i, c := range cs.given {
		if nc, ok := c.(nilCodec); ok {
			p.graphError(fmt.Errorf("%s of %v: StateCodec[%v] is nil: pass a Codec, or leave the option out for GobCodec", op, parent, nc.t))
			continue
		}
		if !cs.used[i] {
			p.graphError(fmt.Errorf("%s of %v: StateCodec of %v: the operator keeps no value of that type; remove it or give a codec of a type it keeps",
				op, parent, reflect.TypeOf(c)))
		}
	}
}

// encode calls c.Encode, a user's codec maybe: a panic is an error (see
// safely), as a panic in an operator's function is, never a crash of the
// process.
func encode[T any](c Codec[T], vs []T) (b []byte, err error) {
	err = safely(func() (err error) { b, err = c.Encode(vs); return err })
	if _, ok := errors.AsType[*panicError](err); ok {
		err = fmt.Errorf("%T in Encode: %w", c, err)
	}
	return b, err
}

// decode calls c.Decode, turning a panic into an error as encode does.
func decode[T any](c Codec[T], b []byte) (vs []T, err error) {
	err = safely(func() (err error) { vs, err = c.Decode(b); return err })
	if _, ok := errors.AsType[*panicError](err); ok {
		err = fmt.Errorf("%T in Decode: %w", c, err)
	}
	return vs, err
}

// checkCodec encodes a slice of one zero T with c and decodes it back: a
// type the codec cannot encode fails here, when Run starts, rather than at
// the first snapshot.
func checkCodec[T any](c Codec[T]) error {
	var zero T
	b, err := encode(c, []T{zero})
	if err == nil {
		var back []T
		back, err = decode(c, b)
		if err == nil && len(back) != 1 {
			err = fmt.Errorf("decoded %d values from the encoding of one", len(back))
		}
	}
	if err != nil {
		return fmt.Errorf("values of type %v cannot be encoded with %T: %w", reflect.TypeFor[T](), c, err)
	}
	return nil
}
