// Package localaws starts real, API-compatible AWS servers on 127.0.0.1 for
// your own application's tests and local runs: kinesalite (Kinesis), dynalite
// (DynamoDB) and, on request, kinesis-mock (the fuller Kinesis API:
// UpdateShardCount, ChildShards, enhanced fan-out). They are the servers
// weir's own tests run against; weir talks to them exactly as to AWS.
//
// They are npm packages, pinned (with their lock file) inside this package,
// so a program built from it runs anywhere. Start installs them with
// `npm ci` on first use into a folder of the user's cache directory
// (os.UserCacheDir()/weir/localaws/<pin>), or into Options.Dir (inside a weir
// checkout: its root), then starts each one with Node on a free loopback
// port. Only Node.js 20+ and npm are needed. Close the Env to stop them; if
// the program dies instead, each server exits with it. Clients from
// Env.KinesisMock work around kinesis-mock's SubscribeToShard quirk (it omits
// the initial-response message the SDK waits for). kinesalite is started
// with one fix: it never answered GetShardIterator AT_TIMESTAMP on a shard
// holding no record at or after the time, which weir asks for whenever a
// lease starts at LATEST (the default), so a reader waited and warned until
// a record arrived; it now answers, as Kinesis does, with an iterator that
// reads the records put from then on. npm runs with
// --ignore-scripts, and npm and the servers see only PATH, HOME, the
// temporary folder and the locale of your environment (npm also proxies and
// npm_config_*), never AWS_* credentials. An installed tree is reused only
// if npm's record of it matches the pinned lock, integrity hashes included.
//
//	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true})
//	if err != nil { ... }
//	defer env.Close()
//	err = env.CreateStream(ctx, "words", 2)
//	cfg := env.AWSConfig() // static credentials, region us-east-1
//	src, err := kinesis.New(kinesis.Config{Stream: "words", App: "app", AWS: &cfg,
//		Endpoint: env.KinesisEndpoint,
//		Leases:   &leasetable.Config{Endpoint: env.DynamoDBEndpoint}})
//
// In tests, ForTest does the same and stops the servers when the test ends.
// Setting WEIR_KINESIS_ENDPOINT, WEIR_DYNAMODB_ENDPOINT or
// WEIR_KINESIS_MOCK_ENDPOINT to a loopback URL uses a server already running
// there instead (the weir-local command, github.com/weirstream/weir/cmd/weir-local,
// starts a set and prints them).
package localaws
