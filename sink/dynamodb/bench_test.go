package dynamodb_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/sink/dynamodb"
)

// BenchmarkSinkVsLoop compares, on dynalite and in the same run, the
// Sink's writes of a batch with a hand-written loop of the same
// conditional UpdateItem calls (ADD a counter, SET a version, on condition
// the version is older) at the same concurrency, each on a table of its
// own. Each iteration writes one batch of records over distinct items with
// both, alternating which goes first; it reports the rate of each and the
// ratio sink/loop (the goal is >= 0.9).
//
//	go test -run '^$' -bench SinkVsLoop -benchtime 20x ./sink/dynamodb
func BenchmarkSinkVsLoop(b *testing.B) {
	env := servers.Env(b)
	c := env.DynamoDB()
	ctx := b.Context()
	const records, par = 512, dynamodb.DefaultConcurrency
	sinkTable, loopTable := createTable(b, c), createTable(b, c)
	s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: sinkTable, Concurrency: par}, toWrite)
	if err != nil {
		b.Fatal(err)
	}
	es := make([]event, records)
	for i := range es {
		es[i] = event{ID: "item-" + strconv.Itoa(i), N: i}
	}
	var sinkTime, loopTime time.Duration
	t0 := batch.Time(1_700_000_000_000)
	for i := 0; b.Loop(); i++ {
		t := t0.Add(time.Duration(i) * time.Second)
		runSink := func() {
			start := time.Now()
			if err := s.Write(ctx, batch.New(t, nil, es)); err != nil {
				b.Fatal(err)
			}
			sinkTime += time.Since(start)
		}
		runLoop := func() {
			start := time.Now()
			if err := handLoop(ctx, c, loopTable, int64(t), es, par); err != nil {
				b.Fatal(err)
			}
			loopTime += time.Since(start)
		}
		if i%2 == 0 {
			runSink()
			runLoop()
		} else {
			runLoop()
			runSink()
		}
	}
	n := float64(b.N * records)
	b.ReportMetric(n/sinkTime.Seconds(), "sink-writes/s")
	b.ReportMetric(n/loopTime.Seconds(), "loop-writes/s")
	b.ReportMetric(loopTime.Seconds()/sinkTime.Seconds(), "sink/loop")
	if st := s.Stats(); st.Written != int64(n) {
		b.Fatalf("sink wrote %d, want %v", st.Written, n)
	}
}

// handLoop is what one would write by hand: par goroutines take the
// records in turn and send each its conditional UpdateItem.
func handLoop(ctx context.Context, c *ddb.Client, table string, t int64, es []event, par int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, par)
	for g := range par {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(es) {
					return
				}
				_, err := c.UpdateItem(ctx, &ddb.UpdateItemInput{
					TableName:                aws.String(table),
					Key:                      map[string]types.AttributeValue{"id": str(es[i].ID)},
					UpdateExpression:         aws.String("ADD hits :one SET #last = :n, #v = :v"),
					ConditionExpression:      aws.String("NOT #v >= :v"), // the sink's condition
					ExpressionAttributeNames: map[string]string{"#last": "last", "#v": "v"},
					ExpressionAttributeValues: map[string]types.AttributeValue{
						":one": num(1), ":n": num(es[i].N), ":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(t, 10) + "000000000"},
					},
				})
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
