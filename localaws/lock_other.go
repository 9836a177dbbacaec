//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package localaws

import "context"

// lockFile takes the install lock at path with lockExclusiveCreate, since
// this platform (Windows among others) has no flock(2) in package syscall.
func lockFile(ctx context.Context, path string, contended func()) (func(), error) {
	return lockExclusiveCreate(ctx, path, contended)
}
