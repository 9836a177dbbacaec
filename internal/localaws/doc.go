// Package localaws holds the test helpers of weir's own tests around the
// local AWS servers of the public package github.com/weirstream/weir/localaws
// (which holds the implementation; its names are repeated here): [Shared],
// one set of servers for a whole test binary, and [UniqueName], a stream or
// table name of a test's own.
//
//	var servers = localaws.NewShared(localaws.Options{Kinesis: true, DynamoDB: true})
//
//	func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }
//
//	func TestX(t *testing.T) {
//		env := servers.Env(t)
//		if err := env.CreateStream(t.Context(), localaws.UniqueName(t), 2); err != nil { ... }
//	}
//
// Tests run from inside the checkout, so the servers are installed into
// node_modules at the repository's root (or the folder WEIR_LOCALAWS_DIR
// names); see the public package for the environment variables.
//
// # Faults
//
// No local server throttles or drops connections. Package
// github.com/weirstream/weir/internal/localaws/faults provides an HTTP client
// that injects such faults, to install in a client with
// env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr }).
package localaws
