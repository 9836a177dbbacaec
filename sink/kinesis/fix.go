package kinesis

import (
	"errors"
	"fmt"
	"strings"

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
		denied   *types.AccessDeniedException
		notFound *types.ResourceNotFoundException
		api      smithy.APIError
	)
	code := ""
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	endpoint := s.endpoint
	if endpoint == "" {
		endpoint = "the client's endpoint"
	}
	if fix := awserr.KinesisKeyFix(err, "GenerateDataKey"); fix != "" {
		return fix + " (docs/iam/kinesis-sink.json)"
	}
	switch {
	case errors.As(err, &denied), awserr.AccessDenied(err):
		return fmt.Sprintf("allow kinesis:PutRecords on stream %s to these credentials (the sink's IAM policy is docs/iam/kinesis-sink.json)", s.cfg.Stream)
	case errors.As(err, &notFound):
		return fmt.Sprintf("stream %s does not exist at %s: create it, or check the sink's Stream, the region and the endpoint", s.cfg.Stream, endpoint)
	case awserr.BadCredentials(err):
		return "the credentials are not valid for this account and region: check the client's credentials and region"
	case tooLarge(code, err) && s.cfg.MaxRecordBytes > defaultMaxRecordBytes:
		return fmt.Sprintf("MaxRecordBytes is %d, but stream %s takes records of at most its maximum record size (1 MiB unless raised): "+
			"raise the stream's (UpdateMaxRecordSize), or set MaxRecordBytes to it", s.cfg.MaxRecordBytes, s.cfg.Stream)
	}
	return ""
}

// tooLarge reports whether err, of error code code, is Kinesis refusing a
// record's data for its length (a ValidationException on a record's data
// member).
func tooLarge(code string, err error) bool {
	if code != "ValidationException" && code != "InvalidArgumentException" {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, ".data") && strings.Contains(msg, "length less than or equal to")
}
