// Package dynamotable holds DynamoDB's rules for the tables weir uses or is
// given, so that every package that takes a table name, or waits for a
// table, applies the same ones: which names DynamoDB accepts (CheckName),
// which statuses serve reads and writes (Usable), and which no wait cures
// (Stuck). DESIGN.md describes the tables.
package dynamotable
