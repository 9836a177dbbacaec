package recovery

// AppendFrameForTest appends the segment frame of payload to buf, for tests
// that write damaged segments by hand.
var AppendFrameForTest = appendFrame
