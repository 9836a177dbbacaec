package kinesistest

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

// notFound returns the SDK's typed ResourceNotFoundException, as Kinesis
// answers for a missing stream or shard.
func notFound(format string, args ...any) error {
	return &types.ResourceNotFoundException{Message: aws.String(fmt.Sprintf(format, args...))}
}

// invalidArgument returns the SDK's typed InvalidArgumentException.
func invalidArgument(format string, args ...any) error {
	return &types.InvalidArgumentException{Message: aws.String(fmt.Sprintf(format, args...))}
}

// validation returns the generic ValidationException Kinesis answers for a
// parameter outside its documented constraints (a Limit of 0, an unknown
// iterator type): the SDK has no type of its own for it.
func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

// inUse returns the SDK's typed ResourceInUseException.
func inUse(format string, args ...any) error {
	return &types.ResourceInUseException{Message: aws.String(fmt.Sprintf(format, args...))}
}

// throttled returns the error an operation throttled by InjectThrottling
// gives: what Kinesis gives for that operation.
func throttled(op string) error {
	msg := aws.String(fmt.Sprintf("Rate exceeded for %s (injected by kinesistest)", op))
	switch op {
	case OpListShards, OpDescribeStreamSummary:
		return &types.LimitExceededException{Message: msg}
	}
	return &types.ProvisionedThroughputExceededException{Message: msg}
}
