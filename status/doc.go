// Package status serves a live web page of a running pipeline, like Spark
// Streaming's UI tab: charts over time of input rate, scheduling delay,
// processing time and total delay; every shard's position and lag; which
// worker holds which lease across the fleet; the recent batches with their
// sequence ranges, and the failed ones with their errors.
//
// The page is one HTML document drawn on the server from a
// metrics.Collector's Snapshot, charts included (SVG), with no script and
// nothing loaded from elsewhere, so it works offline and behind strict
// proxies. It reloads itself every few seconds. The same snapshot is served
// as JSON at snapshot.json beside it.
//
// The handler shows what the pipeline reads, where it is, which workers run
// and the error texts of failed batches (each cut to 4 KiB), without
// authentication or TLS: serve it on a loopback or otherwise private
// address (the wordcount example serves it on 127.0.0.1 unless told
// otherwise). It answers only requests naming localhost, an IP address or a
// name of Config.Hosts in their Host header, against DNS rebinding, and
// forbids framing and content sniffing; Handler.Guard does the same for a
// handler served beside it, such as Prometheus metrics.
package status
