// Package awserr classifies the errors of AWS calls for weir's retry loops:
// which ones no retry can fix.
package awserr

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
)

// Refused reports whether err is the service refusing the request for a
// reason no retry fixes (a missing table, a malformed request, access
// denied): a client fault that is neither throttling nor one the SDK deems
// retryable (a request timeout), nor expired credentials, which a refresh
// heals. Anything else (no answer, a refused or broken connection, a server
// error) is worth trying again.
func Refused(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorFault() != smithy.FaultClient {
		return false
	}
	switch {
	case sdkThrottles.IsErrorThrottle(err) == aws.TrueTernary,
		sdkRetryables.IsErrorRetryable(err) == aws.TrueTernary,
		expiredCredentials[api.ErrorCode()]:
		return false
	}
	return true
}

// The SDK's own checks of throttling and transient errors, and the codes of
// expired credentials.
var (
	sdkThrottles       = retry.IsErrorThrottles(retry.DefaultThrottles)
	sdkRetryables      = retry.IsErrorRetryables(retry.DefaultRetryables)
	expiredCredentials = map[string]bool{"ExpiredTokenException": true, "ExpiredToken": true, "RequestExpired": true}
)
