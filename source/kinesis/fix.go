package kinesis

import (
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/internal/awserr"
)

// withFix returns err, a Kinesis call's error retrying cannot heal, with
// what would fix it appended when it is known. The result wraps err.
func withFix(op string, err error) error {
	if fix := fixFor(op, err); fix != "" {
		return fmt.Errorf("%w (fix: %s)", err, fix)
	}
	return err
}

// fixFor names the fix of a Kinesis call's error that retrying cannot heal,
// or "" when there is nothing to say beyond the error itself.
func fixFor(op string, err error) string {
	var (
		notFound *types.ResourceNotFoundException
		denied   *types.AccessDeniedException
		dns      *net.DNSError
	)
	if fix := awserr.KinesisKeyFix(err, "Decrypt"); fix != "" {
		return fix + " (docs/iam.md)"
	}
	switch {
	case errors.As(err, &denied), awserr.AccessDenied(err):
		return fmt.Sprintf("allow the action kinesis:%s on the stream to these credentials (the IAM policies weir needs are in docs/iam.md)", op)
	case errors.As(err, &notFound) && op == "DescribeStreamSummary":
		return "check Config.Stream, the region and the endpoint, or create the stream first: the stream does not exist there"
	case errors.As(err, &notFound):
		return "check Config.Stream, the region and the endpoint: the stream or shard does not exist there (deleted?)"
	case awserr.BadCredentials(err):
		return "the credentials are not valid for this account and region: check Config.AWS (access key, secret, session token, region)"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host: check Config.Endpoint and the region"
	}
	return ""
}
