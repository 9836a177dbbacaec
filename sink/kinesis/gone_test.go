package kinesis_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// deniedPuts is a Client whose PutRecords calls are refused as AWS
// refuses a call the credentials may not make.
type deniedPuts struct{}

func (deniedPuts) PutRecords(context.Context, *awskinesis.PutRecordsInput, ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized", Fault: smithy.FaultClient}
}

// letterCount counts the letters quarantined.
type letterCount struct {
	mu sync.Mutex
	n  int
}

func (c *letterCount) Quarantine(_ context.Context, letters []stream.DeadLetter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(letters)
	return nil
}

// TestStreamRefusalStopsAtOnce: a Sink whose stream is deleted while the
// pipeline runs (kinesalite), or whose PutRecords the credentials may not
// make, stops Run at once with the refusal and its fix, with or without
// stream.Quarantine. Before, the output was tried again (a "trying again"
// WARN per retry) and then failed advising stream.Quarantine, or, with
// Quarantine, every batch's records went to the dead letters, four WARNs
// a batch, for as long as the pipeline ran.
func TestStreamRefusalStopsAtOnce(t *testing.T) {
	env := servers.Env(t)
	for _, c := range []struct {
		name   string
		client func(t *testing.T, name string) kinesis.Client
		want   string
	}{
		{"stream deleted", func(t *testing.T, name string) kinesis.Client {
			kc := env.Kinesis()
			if _, err := kc.DeleteStream(t.Context(), &awskinesis.DeleteStreamInput{StreamName: aws.String(name)}); err != nil {
				t.Fatal(err)
			}
			return kc
		}, "does not exist"},
		{"access denied", func(*testing.T, string) kinesis.Client { return deniedPuts{} }, "allow kinesis:PutRecords"},
	} {
		for _, quarantine := range []bool{false, true} {
			name := c.name
			if quarantine {
				name += " quarantine"
			}
			t.Run(name, func(t *testing.T) {
				out := newStream(t, env, 1)
				s, err := kinesis.New(kinesis.Config[source.Record]{Client: c.client(t, out), Stream: out, Record: dataOf})
				if err != nil {
					t.Fatal(err)
				}
				var logs logBuffer
				p, err := stream.NewPipeline(stream.Config{BatchInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				src, err := memory.New[source.Record](memory.Config{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range 4 {
					if err := src.Push(source.Record{Data: []byte("k/" + strconv.Itoa(i))}); err != nil {
						t.Fatal(err)
					}
				}
				letters := &letterCount{}
				var opts []stream.Option
				if quarantine {
					opts = append(opts, stream.Quarantine(letters))
				}
				stream.ForEachBatch(stream.From(p, src), s.Write, opts...)
				if err := p.Drain(t.Context()); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				err = p.Run(ctx)
				if err == nil {
					t.Fatalf("Run = nil, want the refusal; %d records quarantined", letters.n)
				}
				for _, w := range []string{out, c.want, "fix:"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Run = %v\nwant it to say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "stream.Quarantine") {
					t.Errorf("Run = %v\nadvises Quarantine for a refusal of the whole stream", err)
				}
				if letters.n > 0 {
					t.Errorf("%d records quarantined for a refusal of the whole stream, want none", letters.n)
				}
				if got := logs.String(); strings.Contains(got, "trying again") {
					t.Errorf("the refusal was tried again before Run failed:\n%s", got)
				}
			})
		}
	}
}
