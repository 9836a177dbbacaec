// Package dynamotable holds DynamoDB's rules for the tables weir uses, so
// that every package that takes a table name, or waits for a table, applies
// the same ones: which names DynamoDB accepts (CheckName). DESIGN.md
// describes the tables.
package dynamotable
