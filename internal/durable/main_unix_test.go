//go:build unix

package durable_test

import (
	"os"
	"syscall"
	"testing"
)

// TestMain clears the umask, so that the tests see the modes weir asks for,
// not what a umask leaves of them.
func TestMain(m *testing.M) {
	syscall.Umask(0)
	os.Exit(m.Run())
}
