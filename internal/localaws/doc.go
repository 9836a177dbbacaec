// Package localaws runs real local AWS servers for weir's tests and examples:
// kinesalite (Kinesis), dynalite (DynamoDB) and, on request, kinesis-mock (the
// fuller Kinesis API: UpdateShardCount, ChildShards, enhanced fan-out).
// Clients from [Env.KinesisMock] work around kinesis-mock's SubscribeToShard
// quirk (it omits the initial-response message the SDK waits for).
//
// The servers are npm packages pinned in the repository's package.json and
// package-lock.json. [Start] installs them with `npm ci --ignore-scripts`
// (npm checks each tarball against the lock's sha512 integrity) into
// node_modules beside package.json unless npm's record of the installed tree
// (node_modules/.package-lock.json) matches the lock, package by package and
// integrity by integrity (concurrent test processes take turns through a file
// lock, so only one installs), then starts each server
// with Node on a free port of 127.0.0.1 and waits until it serves. Only Go,
// Node.js 20+ and npm are needed. [Env.Close] stops them; if the Go process
// dies instead, each server exits when its stdin, a pipe from the Go process,
// closes (on Linux the parent-death signal also kills it). npm and the
// servers get an allow-listed environment (PATH, HOME, temporary folder,
// locale; proxies and npm_config_* for npm), never the caller's AWS_*
// variables.
//
// It builds and runs on Linux, macOS and Windows. The install lock is a
// flock(2) where the platform has one, else a lock file created exclusively
// whose holder keeps it fresh, so that one left by a dead holder is taken
// over once stale. On Windows stopping a server kills it at once, as there is
// no SIGTERM to send.
//
// In tests, [ForTest] starts servers for one test, and [Shared] one set for a
// whole test binary:
//
//	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
//	if err := env.CreateStream(ctx, "s", 2); err != nil { ... }
//	kc := env.Kinesis()
//	dc := env.DynamoDB()
//
// # Environment
//
// These variables are read by [Start]:
//
//   - WEIR_KINESIS_ENDPOINT: use this Kinesis endpoint instead of starting kinesalite.
//   - WEIR_DYNAMODB_ENDPOINT: use this DynamoDB endpoint instead of starting dynalite.
//   - WEIR_KINESIS_MOCK_ENDPOINT: use this endpoint instead of starting kinesis-mock.
//   - WEIR_LOCALAWS_DIR: the folder holding package.json and node_modules, instead
//     of the nearest folder above the working directory that holds weir's go.mod.
//
// An endpoint variable must be an http or https URL on 127.0.0.1, ::1 or
// localhost ([ErrNotLoopback] otherwise): tests never send traffic anywhere
// else. When every server asked for has its variable set, nothing is
// installed or started.
//
// # Faults
//
// No local server throttles or drops connections. Package
// github.com/weirstream/weir/internal/localaws/faults provides an HTTP client
// that injects such faults, to install in a client with
// env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr }).
package localaws
