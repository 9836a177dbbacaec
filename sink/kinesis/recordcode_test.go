package kinesis_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/noretry"
)

// TestRecordErrorCodes injects each per-record error code of a
// PutRecords result: the codes the API reference documents for a record
// (ProvisionedThroughputExceededException, InternalFailure), and KMS
// throttling, heal with time and are retried; a code of the stream's
// refusal (its KMS key's, IAM's, the stream gone) is the same at every
// try and fails the Write at once, marked as no retry fixes, with the
// fix; a code weir does not know fails the Write, for the output's
// retries, bounded, to try again. Before, every per-record code was
// retried with back-off for as long as it was answered.
func TestRecordErrorCodes(t *testing.T) {
	const healsAfter = 20 // calls; a code retried for ever would make more
	for _, c := range []struct {
		code    string
		retried bool
		marked  bool
		want    string // in the error
	}{
		{"ProvisionedThroughputExceededException", true, false, ""},
		{"InternalFailure", true, false, ""},
		{"KMSThrottlingException", true, false, ""},
		{"KMSAccessDeniedException", false, true, "allow kms:GenerateDataKey"},
		{"KMSDisabledException", false, true, "enable the key"},
		{"KMSNotFoundException", false, true, "enable the key"},
		{"KMSInvalidStateException", false, true, "enable the key"},
		{"KMSOptInRequired", false, true, "opt in to AWS KMS"},
		{"AccessDeniedException", false, true, "allow kinesis:PutRecords"},
		{"ResourceNotFoundException", false, true, "does not exist"},
		{"SomeNewCode", false, false, "SomeNewCode"},
	} {
		t.Run(c.code, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(t, func(call int, _ rec) string {
					if call > healsAfter {
						return ""
					}
					return c.code
				})
				s := newSink(t, f, "", false)
				err := s.Write(t.Context(), batch.New(1000, nil, records(10, 3, 0)))
				switch {
				case c.retried && (err != nil || f.calls <= healsAfter):
					t.Fatalf("Write = %v after %d calls; want it retried until the code stops, then nil", err, f.calls)
				case c.retried:
					return
				case err == nil || f.calls != 1:
					t.Fatalf("Write = %v after %d calls; want it to fail after the first", err, f.calls)
				}
				if noretry.Is(err) != c.marked {
					t.Errorf("Write = %v: marked as no retry fixes %v, want %v", err, noretry.Is(err), c.marked)
				}
				for _, w := range []string{c.code, `"out"`, c.want} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Write = %v\nwant it to say %q", err, w)
					}
				}
			})
		})
	}
}
