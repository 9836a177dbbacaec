// Package dynamotable holds DynamoDB's rules for the tables weir uses or is
// given, so that every package that takes a table name, or waits for a
// table, applies the same ones: which names DynamoDB accepts (CheckName),
// which statuses serve reads and writes (Usable), which no wait cures
// (Stuck), and how a wait for a table not usable yet is bounded and warned
// of (Wait). DESIGN.md describes the tables.
package dynamotable
