// Package files is an exactly-once file sink for weir pipelines: it writes
// each batch to its own file, named after the batch time, atomically, and
// skips a batch whose file already exists (a regular file:
// anything else at its name is an error, and its directory must be one only
// its owner can write, see Config.Dir).
//
// With a recovery log (stream.Config.Recovery), a batch that a crash
// interrupted runs again after the restart with the same time and the same
// records (guarantee G2 in the repository's DESIGN.md), so writing it again
// would only rewrite the same file: Write notices the file and does nothing
// (stream.HasRecovery tells it the pipeline has a log).
// Without a recovery log a batch time is never run again, but a restart
// whose wall clock is behind the last Run's batches repeats their times: a
// file of the batch's time holding other records makes Write fail with
// ErrTimeReused rather than drop the batch's records.
// A batch is written to a temporary file, which is synced, renamed to its
// final name and made durable by syncing the directory, so a crash leaves
// either the whole file or none (a hidden temporary file, removed by the
// next New):
//
//	sink, err := files.New(files.Config[string]{Dir: "out"})
//	defer sink.Close()
//	stream.ForEachBatch(lines, sink.Write, stream.Named("files"))
//
// A directory has one Sink at a time: New locks it, as a directory recovery
// log is locked, so a second process given the same directory fails
// instead of both reporting success; as the log's open does, New first
// waits a while (Config.LockWait, 10 s) for a predecessor that is still
// exiting to release it. A Sink serves one output of a pipeline: given to
// a second one, or to another pipeline running at the same time, whose
// batches of a time would go to the same files, the second one's Write
// fails the batch, and Run, saying to give each output its own.
//
// An empty batch gets no file unless Config.WriteEmpty is set, so an idle
// pipeline writes nothing; that is still exactly-once, as a batch empty
// when first run is empty when recomputed. By default the files of the
// last day of batch times are kept (DefaultMaxAge); Config.Keep and
// Config.MaxAge set another retention, and a negative MaxAge keeps every
// file. Retention removes only files of batches a restart cannot run
// again, so it keeps those of the 10 s before the batch preceding the
// newest too (see Sink.Write).
//
// Of weir's public packages it imports batch, clock and stream (for
// HasRecovery).
package files
