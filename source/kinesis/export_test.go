package kinesis

// Servers gives the tests of package kinesis_test the package's shared
// local servers (one test binary, one TestMain).
var Servers = servers
