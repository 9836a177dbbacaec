package stream

// WordLines gives the external benchmarks the generator of the internal
// ones.
var WordLines = wordLines
