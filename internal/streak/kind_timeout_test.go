package streak

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
)

// TestKindOfAbandonedAttempt: a call whose attempts got no answer, each
// abandoned by attempt.Middleware (the lease table's and the state
// table's bound), is of kind "no answer", as a timeout is documented to
// be, not "other": grouped with failures that are not AWS errors, a
// DynamoDB outage seen as timeouts would stay at DEBUG behind one shard
// failing for a reason of its own.
func TestKindOfAbandonedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stack := middleware.NewStack("UpdateItem", func() interface{} { return struct{}{} })
		if err := attempt.Middleware(clock.Real{}, time.Second)(stack); err != nil {
			t.Fatal(err)
		}
		silent := middleware.HandlerFunc(func(ctx context.Context, _ interface{}) (interface{}, middleware.Metadata, error) {
			<-ctx.Done() // DynamoDB never answers
			return nil, middleware.Metadata{}, &smithy.CanceledError{Err: ctx.Err()}
		})
		_, _, err := middleware.DecorateHandler(silent, stack).Handle(context.Background(), nil)
		if err == nil {
			t.Fatal("no error from an attempt that got no answer")
		}
		err = &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: err}
		if got := Kind(err); got != "no answer" {
			t.Errorf("Kind(%v) = %q, want %q", err, got, "no answer")
		}
	})
}
