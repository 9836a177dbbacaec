// Package kinesisrecovery holds the end-to-end test of the driver's crash
// recovery on local Kinesis (kinesalite, started by localaws) with
// the Kinesis receiver and a directory recovery log: the seed's "failure
// recovery" test (SPARK-9217). It is a package of its own so that the
// stream package's tests stay fast and need no servers. It has no API.
package kinesisrecovery
