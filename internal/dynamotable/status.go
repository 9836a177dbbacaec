package dynamotable

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Usable reports whether a table of status serves reads and writes: an
// ACTIVE one, and an UPDATING one too (its capacity or billing mode being
// changed, an index being built: minutes to an hour, during which DynamoDB
// goes on serving it). A CREATING table does not yet; a DELETING one, an
// ARCHIVED or INACCESSIBLE_ENCRYPTION_CREDENTIALS one no longer does.
func Usable(status types.TableStatus) bool {
	return status == types.TableStatusActive || status == types.TableStatusUpdating
}

// Stuck returns why table, of status, will not become usable by waiting,
// naming the fix, or nil if it may (CREATING, DELETING: a new one is then
// created) or is usable. DynamoDB's DescribeTable: a table whose KMS key is
// inaccessible is INACCESSIBLE_ENCRYPTION_CREDENTIALS, and is archived
// (ARCHIVING, then ARCHIVED, with a backup) after seven days of it.
func Stuck(table string, status types.TableStatus) error {
	switch status {
	case types.TableStatusInaccessibleEncryptionCredentials:
		return fmt.Errorf("table %s is %s: the KMS key it is encrypted with cannot be used, and DynamoDB archives the table after seven days of it; "+
			"fix: give access to the key again (enable it, or its key policy and grants)", table, status)
	case types.TableStatusArchiving, types.TableStatusArchived:
		return fmt.Errorf("table %s is %s: DynamoDB archived it, its KMS key inaccessible for more than seven days; "+
			"fix: restore it from the backup DynamoDB made when archiving it, or delete it, or use another table name", table, status)
	}
	return nil
}

// ErrNoDescription is wrapped by the error of a DescribeTable whose answer
// holds no table description, which DynamoDB never sends: the client given
// is not DynamoDB's, or a fake that leaves it out.
var ErrNoDescription = errors.New("the answer holds no table description (DynamoDB always sends one): " +
	"check that the client given sends to DynamoDB, or that a fake client returns Table")
