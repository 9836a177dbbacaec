package stream

import (
	"fmt"
	"path"
	"reflect"
	"time"

	"github.com/weirstream/weir/recovery"
)

// Option is an optional setting of a source (From), an output (ForEach,
// ForEachPartition, ForEachBatch, Print) or a stateful operator: Named for
// the first two, PartitionedByKey for a source (or MapWithState), Retry and
// Quarantine for outputs, Origins for ForEachBatch, StateCodec and
// StateTimeout for the last. An option given to an operator that does not
// take it would be ignored, so Run and Validate refuse it, with an error
// wrapping ErrInvalidConfig naming the operator and the option.
type Option func(*options)

type options struct {
	given   optionKind // the Options given, so an operator can refuse those it does not take
	name    string
	codecs  []any         // StateCodec: Codec[T] values
	timeout time.Duration // StateTimeout
	// partitioned is PartitionedByKey.
	partitioned bool

	// An output's failure policy (failure.go).
	retries    *int        // Retry; nil: DefaultRetries
	dead       DeadLetters // Quarantine
	quarantine bool        // Quarantine was given, even with nil
	origins    bool        // Origins (origins.go)
}

func applyOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// optionKind is a set of Options, one bit per Option function.
type optionKind uint8

const (
	optNamed optionKind = 1 << iota
	optStateCodec
	optStateTimeout
	optPartitionedByKey
	optRetry
	optQuarantine
	optOrigins
)

// The Options each kind of operator takes.
const (
	sourceOptions       = optNamed | optPartitionedByKey
	outputOptions       = optNamed | optRetry | optQuarantine
	keyedOptions        = optQuarantine
	windowOptions       = optStateCodec | optQuarantine
	stateOptions        = optStateCodec | optQuarantine
	mapWithStateOptions = optStateCodec | optStateTimeout | optPartitionedByKey | optQuarantine
)

// optionTakers names each Option and the operators that take it, by bit.
var optionTakers = [...]struct{ name, takers string }{
	{"Named", "From and the outputs"},
	{"StateCodec", "the stateful operators (UpdateStateByKey, MapWithState, Window, ReduceByKeyAndWindow)"},
	{"StateTimeout", "MapWithState"},
	{"PartitionedByKey", "From and MapWithState"},
	{"Retry", "the outputs (ForEach, ForEachPartition, ForEachBatch, Print)"},
	{"Quarantine", "the outputs (ForEach, ForEachPartition, ForEachBatch, Print), the keyed, window and state operators (ReduceByKey, CountByValue, Window, ReduceByKeyAndWindow, UpdateStateByKey, MapWithState) and Transform"},
	{"Origins", "ForEachBatch"},
}

// refuseOthers records a graph error for every option of o that what, an
// operator taking the options takes, would otherwise ignore: an option
// given to the wrong operator is a mistake to fix, not a setting to drop.
func (o options) refuseOthers(p *Pipeline, what string, takes optionKind) {
	for i, t := range optionTakers {
		if k := optionKind(1) << i; o.given&k != 0 && takes&k == 0 {
			p.graphError(fmt.Errorf("%s: %s is an option of %s only: remove it", what, t.name, t.takers))
		}
	}
}

// Named names a source or an output in the pipeline's shape, which the
// recovery log records and checks on every restart (see Config.Recovery):
// ForEachBatch(counts, write, stream.Named("files")) is recorded as
// ForEachBatch("files"). Naming outputs lets a restart with a different
// pipeline be told precisely what changed, and refused. For a source, the
// name replaces the one its Describe method gives, if any.
func Named(name string) Option {
	return func(o *options) { o.name, o.given = name, o.given|optNamed }
}

// Describer is implemented by a receiver that describes itself in the
// pipeline's shape: its kind, such as "kinesis", and a name among receivers
// of that kind, such as the stream it reads ("" for none).
//
// A receiver that does not implement it is described by the last element of
// the package path of its type (so a *kinesis.Receiver is "kinesis" and a
// *memory.Source[T] is "memory"), or "receiver" for a type without one, and
// by the name given with Named.
type Describer interface {
	Describe() (kind, name string)
}

// describeSource returns the shape component of receiver r, named by o.
func describeSource(r any, o options) recovery.Component {
	c := recovery.Component{Kind: "receiver", Name: o.name}
	if d, ok := r.(Describer); ok {
		kind, name := d.Describe()
		if kind != "" {
			c.Kind = kind
		}
		if c.Name == "" {
			c.Name = name
		}
		return c
	}
	t := reflect.TypeOf(r)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.PkgPath() != "" {
		c.Kind = path.Base(t.PkgPath())
	}
	return c
}

// shapeLocked returns the pipeline's shape: its sources and outputs in
// declaration order. p.mu is held.
func (p *Pipeline) shapeLocked() recovery.Shape {
	var sh recovery.Shape
	for _, s := range p.sources {
		sh.Sources = append(sh.Sources, s.component())
	}
	for _, o := range p.outputs {
		sh.Outputs = append(sh.Outputs, o.component())
	}
	return sh
}

// Shape returns the shape of the pipeline built so far: its sources and
// outputs in declaration order, as the recovery log records it; empty for a
// nil Pipeline.
func (p *Pipeline) Shape() recovery.Shape {
	if p == nil {
		return recovery.Shape{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shapeLocked()
}
