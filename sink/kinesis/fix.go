package kinesis

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/internal/awserr"
)

// withFix returns err, the error of a PutRecords call Kinesis refused for
// good, with what would fix it appended when it is known. The result wraps
// err.
func (s *Sink[T]) withFix(err error) error {
	if fix := s.fixFor(err); fix != "" {
		return fmt.Errorf("%w (fix: %s)", err, fix)
	}
	return err
}

// fixFor names the fix of a refused PutRecords call's error, or "" when
// there is nothing to say beyond the error itself.
func (s *Sink[T]) fixFor(err error) string {
	var (
		denied    *types.AccessDeniedException
		kmsDenied *types.KMSAccessDeniedException
		kmsOff    *types.KMSDisabledException
		kmsGone   *types.KMSNotFoundException
		kmsState  *types.KMSInvalidStateException
		kmsOptIn  *types.KMSOptInRequired
		notFound  *types.ResourceNotFoundException
		api       smithy.APIError
	)
	code := ""
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	endpoint := s.endpoint
	if endpoint == "" {
		endpoint = "the client's endpoint"
	}
	switch {
	case errors.As(err, &denied), code == "AccessDeniedException", code == "AccessDenied":
		return fmt.Sprintf("allow kinesis:PutRecords on stream %s to these credentials (the sink's IAM policy is docs/iam/kinesis-sink.json)", s.cfg.Stream)
	case errors.As(err, &kmsDenied):
		return "allow kms:GenerateDataKey on the stream's KMS key to these credentials, in the key's policy or an IAM policy (docs/iam/kinesis-sink.json)"
	case errors.As(err, &kmsOff), errors.As(err, &kmsGone), errors.As(err, &kmsState):
		return "the stream's KMS key is disabled, deleted or unusable: enable the key, or restore it"
	case errors.As(err, &kmsOptIn):
		return "the AWS account has no KMS subscription: opt in to AWS KMS"
	case errors.As(err, &notFound):
		return fmt.Sprintf("stream %s does not exist at %s: create it, or check the sink's Stream, the region and the endpoint", s.cfg.Stream, endpoint)
	case awserr.BadCredentials(err):
		return "the credentials are not valid for this account and region: check the client's credentials and region"
	}
	return ""
}
