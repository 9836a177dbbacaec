// Package apicheck checks the shape of weir's packages with go list: the
// examples import no internal package, so a user can copy them into a module
// of their own; no public package holds only tests or aliases an internal
// package's type (go doc would hide its methods); and DESIGN.md's table of
// packages lists every package with what it imports. The package has no API:
// everything is in its test.
package apicheck
