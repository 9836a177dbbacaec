package recovery

// AppendFrameForTest appends the segment frame of payload to buf, for tests
// that write damaged segments by hand.
var AppendFrameForTest = appendFrame

// HoldSnapshotWritesForTest makes the directory log l call hold in each
// PutSnapshot, before it writes the file.
func HoldSnapshotWritesForTest(l Log, hold func()) { l.(*dirLog).snapHook = hold }
