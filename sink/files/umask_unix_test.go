//go:build unix

package files

import "syscall"

func setUmask(mask int) { syscall.Umask(mask) }
