// Package awserr classifies the errors of AWS calls for weir's retry loops:
// which ones no retry can fix, and which ones are DynamoDB throttling.
package awserr

import (
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

// Refused reports whether err is the service refusing the request for a
// reason no retry fixes (a missing table, a malformed request, access
// denied): a client fault that is neither throttling nor one the SDK deems
// retryable (a request timeout), nor expired credentials, which a refresh
// heals, nor a conflict with another writer of the item (see
// DynamoDBConflict), which ends. Anything else (no answer, a refused or
// broken connection, a server error) is worth trying again.
//
// An error the service's API model does not name (DynamoDB's
// ValidationException, such as "Item size to update has exceeded the
// maximum allowed size") comes with no fault: it is a client fault when
// its HTTP status is 400, the status of the AWS JSON protocols' client
// errors. A call the SDK refused to send (its parameter validation: a
// required field missing, such as a nil Data of a Kinesis record) is
// refused too: no try sends it.
func Refused(err error) bool {
	if invalidParams(err) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorFault() {
	case smithy.FaultClient:
	case smithy.FaultUnknown:
		var resp *awshttp.ResponseError
		if !errors.As(err, &resp) || resp.HTTPStatusCode() != http.StatusBadRequest {
			return false
		}
	default:
		return false
	}
	switch {
	case sdkThrottles.IsErrorThrottle(err) == aws.TrueTernary,
		sdkRetryables.IsErrorRetryable(err) == aws.TrueTernary,
		expiredCredentials[api.ErrorCode()],
		DynamoDBConflict(err):
		return false
	}
	return true
}

// invalidParams reports whether err is the SDK refusing to send a call
// whose parameters its own validation refuses (a required field missing):
// the same call is refused at every try.
func invalidParams(err error) bool {
	var v smithy.InvalidParamsError
	var p *smithy.InvalidParamsError
	return errors.As(err, &v) || errors.As(err, &p)
}

// The SDK's own checks of throttling and transient errors, and the codes of
// expired credentials.
var (
	sdkThrottles       = retry.IsErrorThrottles(retry.DefaultThrottles)
	sdkRetryables      = retry.IsErrorRetryables(retry.DefaultRetryables)
	expiredCredentials = map[string]bool{"ExpiredTokenException": true, "ExpiredToken": true, "RequestExpired": true}
)

// DynamoDBThrottled reports whether err is DynamoDB throttling a request:
// ProvisionedThroughputExceededException (the table's or an index's
// capacity), ThrottlingException, or RequestLimitExceeded (the account's
// throughput quota). DynamoDB answered: the request was not carried out,
// and a retry after a while can be.
func DynamoDBThrottled(err error) bool {
	var (
		pte *types.ProvisionedThroughputExceededException
		te  *types.ThrottlingException
		rle *types.RequestLimitExceeded
	)
	return errors.As(err, &pte) || errors.As(err, &te) || errors.As(err, &rle)
}

// DynamoDBConflict reports whether err is DynamoDB rejecting a write of an
// item another request holds: TransactionConflictException (an ongoing
// TransactWriteItems of the item, which PutItem and UpdateItem answer
// with) or ReplicatedWriteConflictException (a write of the item in
// another Region of a global table). Nothing was applied, and a retry once
// the other request is done can be; the SDK's retryer does not retry
// either.
func DynamoDBConflict(err error) bool {
	var (
		tce *types.TransactionConflictException
		rwc *types.ReplicatedWriteConflictException
	)
	return errors.As(err, &tce) || errors.As(err, &rwc)
}

// AccessDenied reports whether err is AWS denying a call for want of an
// IAM permission (AccessDeniedException, or AccessDenied as some services
// spell it), which no retry heals until a policy allows the action.
func AccessDenied(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	code := api.ErrorCode()
	return code == "AccessDeniedException" || code == "AccessDenied"
}

// BadCredentials reports whether err is AWS refusing a request's
// credentials or signature (UnrecognizedClientException,
// InvalidClientTokenId, InvalidSignatureException, SignatureDoesNotMatch,
// MissingAuthenticationToken, IncompleteSignature): the credentials are not
// valid for the account and region, which no retry heals.
func BadCredentials(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException",
		"SignatureDoesNotMatch", "MissingAuthenticationToken", "IncompleteSignature":
		return true
	}
	return false
}

// TargetRefused reports whether err is AWS refusing a call for its target
// as a whole rather than for what the call carried: the table or stream
// does not exist (ResourceNotFoundException: deleted, or never there), the
// credentials may not use it (AccessDeniedException, AccessDenied) or are
// not valid (BadCredentials), or the stream's KMS key refuses (see
// KinesisKeyFix). Every later call to the target is refused alike, whatever
// it carries: a sink's write so refused is no record's fault, and setting
// its records aside would set aside every record.
func TargetRefused(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	return api.ErrorCode() == "ResourceNotFoundException" || AccessDenied(err) || BadCredentials(err) || KinesisKeyFix(err, "") != ""
}

// KinesisKeyFix names the fix of err when it is Kinesis refusing a call
// for the stream's KMS key, or returns "": access to the key denied (kms:
// action on the key to these credentials), the key disabled, deleted or
// unusable, or the account without KMS.
func KinesisKeyFix(err error, action string) string {
	var (
		denied *ktypes.KMSAccessDeniedException
		off    *ktypes.KMSDisabledException
		gone   *ktypes.KMSNotFoundException
		state  *ktypes.KMSInvalidStateException
		optIn  *ktypes.KMSOptInRequired
	)
	switch {
	case errors.As(err, &denied):
		return "allow kms:" + action + " on the stream's KMS key to these credentials, in the key's policy or an IAM policy"
	case errors.As(err, &off), errors.As(err, &gone), errors.As(err, &state):
		return "the stream's KMS key is disabled, deleted or unusable: enable the key, or restore it"
	case errors.As(err, &optIn):
		return "the AWS account has no KMS subscription: opt in to AWS KMS"
	}
	return ""
}
