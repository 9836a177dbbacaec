package dynamochunk

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/internal/awserr"
)

// AccessFix returns err, the error of a call on table, with its fix
// appended if DynamoDB denied the call for want of an IAM permission
// (AccessDeniedException, which DynamoDB's API model does not name: a
// generic API error of that code): allow the call's action on table, which
// policy (a file under docs/iam) lists with the table's other actions.
// Any other err is returned as it is.
func AccessFix(err error, table, policy string) error {
	if !awserr.AccessDenied(err) {
		return err
	}
	action := "the actions it lists"
	if op := (*smithy.OperationError)(nil); errors.As(err, &op) {
		action = "dynamodb:" + op.OperationName
	}
	return fmt.Errorf("%w; fix: allow %s on table %s to these credentials (%s; CreateTable, to create the table, is in docs/iam/provisioning.json)",
		err, action, table, policy)
}
