package kinesis

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/internal/localaws"
)

// TestUpdateShardCountOnKinesisMock reshards with UpdateShardCount, which
// kinesalite lacks. kinesis-mock is slow to put to: the stream stays small.
func TestUpdateShardCountOnKinesisMock(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{KinesisMock: true})
	client := env.KinesisMock()
	stream := localaws.UniqueName(t)
	if err := localaws.CreateStreamOn(t.Context(), client, stream, 2); err != nil {
		t.Fatal(err)
	}
	data := payloads("u", 600)
	if err := localaws.PutRecordsOn(t.Context(), client, stream, data[:300], nil); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(env, stream)
	cfg.AWS, cfg.Endpoint, cfg.Client = nil, "", env.KinesisMock(func(o *awskinesis.Options) { o.Retryer = aws.NopRetryer{} })
	run := startReceiver(t, cfg, len(data))
	if _, err := client.UpdateShardCount(t.Context(), &awskinesis.UpdateShardCountInput{
		StreamName: aws.String(stream), TargetShardCount: aws.Int32(4), ScalingType: types.ScalingTypeUniformScaling,
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, client, stream)
	if err := localaws.PutRecordsOn(t.Context(), client, stream, data[300:], nil); err != nil {
		t.Fatal(err)
	}
	run.wait(t)
	run.stop(t)

	got := run.c.records()
	checkExactlyOnce(t, data, got)
	checkShardOrder(t, got)
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkLineage(t, t.Context(), client, stream, blocks)
	checkRecompute(t, run.r, blocks)
}
