// Package faults provides an HTTP transport that injects the failures no
// local AWS server produces: throttling (ProvisionedThroughputExceededException,
// LimitExceededException), ExpiredIteratorException, HTTP 408, 500 and 503,
// dropped connections, before or after the server handled the request, and
// silent ones (a request held until its caller gives up, or for a delay).
//
// Install it as the HTTPClient of an SDK client, so the SDK decodes an
// injected error exactly as it would a real one (errors.As with
// *types.ProvisionedThroughputExceededException works):
//
//	tr, err := faults.New(faults.Config{Seed: 1, Rules: []faults.Rule{
//		{Operation: "GetRecords", Kind: faults.Throughput, Probability: 0.2},
//	}})
//	kc := env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr })
//
// Rules filter requests by operation (the X-Amz-Target header), fire always,
// with a probability drawn from a seeded generator, after skipping some
// requests, or a limited number of times. The transport counts what it
// injected. Remember that the SDK retries throttling, 5xx and connection
// errors itself: to see each injected error, give the client
// aws.NopRetryer{} or RetryMaxAttempts 1.
//
// A Proxy, a TCP proxy on 127.0.0.1 in front of a local server, takes the
// whole server away from every client given its Endpoint: down
// (connections refused and cut) or partitioned (connections held silent),
// and gives it back, for outage tests of processes that only get an
// endpoint.
package faults
