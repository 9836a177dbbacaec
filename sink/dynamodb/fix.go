package dynamodb

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/internal/awserr"
)

// withFix returns err, the error of a call op (PutItem, UpdateItem,
// DescribeTable) that DynamoDB refused for good, with what would fix it
// appended when it is known. The result wraps err.
func (s *Sink[T]) withFix(op string, err error) error {
	if fix := s.fixFor(op, err); fix != "" {
		return fmt.Errorf("%w (fix: %s)", err, fix)
	}
	return err
}

// fixFor names the fix of a refused call's error, or "" when there is
// nothing to say beyond the error itself.
func (s *Sink[T]) fixFor(op string, err error) string {
	var (
		notFound   *types.ResourceNotFoundException
		collection *types.ItemCollectionSizeLimitExceededException
		api        smithy.APIError
	)
	code := ""
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	endpoint := s.endpoint
	if endpoint == "" {
		endpoint = "the AWS default endpoint of the region"
	}
	switch {
	case awserr.AccessDenied(err):
		return fmt.Sprintf("allow dynamodb:%s on table %s to these credentials (the sink's IAM policy is docs/iam/dynamodb-sink.json)", op, s.table)
	case errors.As(err, &notFound) && op == "DescribeTable":
		return fmt.Sprintf("table %s does not exist at %s: create it first, or check the sink's Table, the region and Endpoint", s.table, endpoint)
	case errors.As(err, &notFound):
		return fmt.Sprintf("table %s does not exist at %s (deleted since New?): create it again, or check the sink's Table, the region and Endpoint", s.table, endpoint)
	case errors.As(err, &collection):
		return "the item collection of this partition key (in a table with a local secondary index) is too large: spread the key's items over more partition keys, or drop the index"
	case code == "ValidationException":
		return "check the Write the function makes of this record: its update expression, Names and Values, its key's types against the table's key schema, " +
			"and the item's size (at most 400 KB, attribute names included)"
	case awserr.BadCredentials(err):
		return "the credentials are not valid for this account and region: check the sink's Config.AWS (access key, secret, session token, region)"
	}
	return ""
}
