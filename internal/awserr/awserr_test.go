package awserr

import (
	"errors"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// answered wraps apiErr as the SDK returns an error the service answered
// with HTTP status.
func answered(status int, apiErr error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: apiErr},
	}}
}

// sdkValidation returns the error of a call the SDK refuses to send, as
// its parameter validation does (a required field missing: a nil Data of
// a Kinesis record).
func sdkValidation() error {
	invalid := smithy.InvalidParamsError{Context: "PutRecordsInput"}
	invalid.Add(smithy.NewErrParamRequired("Records[0].Data"))
	return &smithy.OperationError{ServiceID: "Kinesis", OperationName: "PutRecords", Err: invalid}
}

func TestRefused(t *testing.T) {
	generic := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"modeled client fault", answered(400, &types.ResourceNotFoundException{}), true},
		{"conditional check failed", answered(400, &types.ConditionalCheckFailedException{}), true},
		{"unmodeled 400 (ValidationException)", answered(400, generic("ValidationException")), true},
		{"unmodeled 400 throttling", answered(400, generic("ThrottlingException")), false},
		{"modeled throttling", answered(400, &types.ProvisionedThroughputExceededException{}), false},
		{"expired credentials", answered(400, generic("ExpiredTokenException")), false},
		{"transaction conflict", answered(400, &types.TransactionConflictException{}), false},
		{"replicated write conflict", answered(400, &types.ReplicatedWriteConflictException{}), false},
		{"unmodeled 500", answered(500, generic("InternalFailure")), false},
		{"unmodeled 408", answered(408, generic("RequestTimeout")), false},
		{"modeled server fault", answered(500, &types.InternalServerError{}), false},
		{"no answer", errors.New("connection refused"), false},
		{"the SDK's own validation", sdkValidation(), true},
	} {
		if got := Refused(tc.err); got != tc.want {
			t.Errorf("%s: Refused = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDynamoDBThrottled(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"provisioned throughput exceeded", answered(400, &types.ProvisionedThroughputExceededException{}), true},
		{"throttling", answered(400, &types.ThrottlingException{}), true},
		{"request limit exceeded", answered(400, &types.RequestLimitExceeded{}), true},
		{"conditional check failed", answered(400, &types.ConditionalCheckFailedException{}), false},
		{"server fault", answered(500, &types.InternalServerError{}), false},
		{"no answer", errors.New("connection refused"), false},
	} {
		if got := DynamoDBThrottled(tc.err); got != tc.want {
			t.Errorf("%s: DynamoDBThrottled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBadCredentials(t *testing.T) {
	generic := func(code string) error { return answered(400, &smithy.GenericAPIError{Code: code, Message: "m"}) }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{generic("UnrecognizedClientException"), true},
		{generic("InvalidSignatureException"), true},
		{generic("MissingAuthenticationToken"), true},
		{generic("ExpiredTokenException"), false}, // refreshed credentials heal it
		{generic("AccessDeniedException"), false},
		{answered(400, &types.ResourceNotFoundException{}), false},
		{errors.New("connection refused"), false},
	} {
		if got := BadCredentials(tc.err); got != tc.want {
			t.Errorf("BadCredentials(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestTargetRefused(t *testing.T) {
	generic := func(code string) error {
		return &smithy.GenericAPIError{Code: code, Message: "m", Fault: smithy.FaultClient}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"table gone", answered(400, &types.ResourceNotFoundException{}), true},
		{"stream gone", answered(400, &ktypes.ResourceNotFoundException{}), true},
		{"access denied", answered(400, generic("AccessDeniedException")), true},
		{"access denied (query protocols)", answered(403, generic("AccessDenied")), true},
		{"bad credentials", answered(400, generic("UnrecognizedClientException")), true},
		{"KMS key disabled", answered(400, &ktypes.KMSDisabledException{}), true},
		{"KMS throttling", answered(400, &ktypes.KMSThrottlingException{}), false},
		{"a record's validation", answered(400, generic("ValidationException")), false},
		{"conditional check failed", answered(400, &types.ConditionalCheckFailedException{}), false},
		{"throttling", answered(400, &types.ProvisionedThroughputExceededException{}), false},
		{"no answer", errors.New("connection refused"), false},
	} {
		if got := TargetRefused(tc.err); got != tc.want {
			t.Errorf("%s: TargetRefused = %v, want %v", tc.name, got, tc.want)
		}
	}
}
