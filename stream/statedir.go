package stream

import "github.com/weirstream/weir/recovery"

// stateDir returns the directory of a directory recovery log, "" for any
// other log: source.Runtime.StateDir. The driver holds its lock while the
// receivers run.
func stateDir(o recovery.Opener) string {
	switch o := o.(type) {
	case recovery.DirConfig:
		return o.Path
	case *recovery.DirConfig:
		if o != nil {
			return o.Path
		}
	}
	return ""
}
