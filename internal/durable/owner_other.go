//go:build !unix

package durable

import "io/fs"

// fileOwner reports no owner: this platform's file modes do not tell who
// may write a directory.
func fileOwner(fs.FileInfo) (uid int, ok bool) { return 0, false }
