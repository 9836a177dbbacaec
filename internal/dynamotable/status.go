package dynamotable

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// Usable reports whether a table of status serves reads and writes: an
// ACTIVE one, and an UPDATING one too (its capacity or billing mode being
// changed, an index being built: minutes to an hour, during which DynamoDB
// goes on serving it). A CREATING table does not yet; a DELETING one, an
// ARCHIVED or INACCESSIBLE_ENCRYPTION_CREDENTIALS one no longer does.
func Usable(status types.TableStatus) bool {
	return status == types.TableStatusActive || status == types.TableStatusUpdating
}
