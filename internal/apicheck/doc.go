// Package apicheck checks the shape of weir's public API with go list:
// the examples import no internal package, so a user can copy them into a
// module of their own, and no public package is one that holds only tests.
// The package has no API: everything is in its test.
package apicheck
