package files_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/sink/files"
)

// A Sink writes each batch once: writing a batch time again, as a pipeline
// does when it recomputes a batch after a crash, leaves the file as it was.
// An empty batch gets no file.
func Example() {
	dir, err := os.MkdirTemp("", "files-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	sink, err := files.New(files.Config[string]{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a pipeline: stream.ForEachBatch(s, sink.Write, stream.Named("files")).
	ctx := context.Background()
	for _, b := range []*batch.Batch[string]{
		batch.New(1700000000000, nil, []string{"hello", "world"}),
		batch.New(1700000001000, nil, []string{"again"}),
		batch.New(1700000000000, nil, []string{"hello", "world"}), // recomputed
		batch.New[string](1700000002000, nil),                     // empty: no file
	} {
		if err := sink.Write(ctx, b); err != nil {
			fmt.Println(err)
			return
		}
	}
	times, _ := sink.Batches()
	for _, t := range times {
		data, _ := os.ReadFile(sink.Path(t))
		fmt.Printf("%s: %q\n", filepath.Base(sink.Path(t)), data)
	}
	// Output:
	// batch-1700000000000.txt: "hello\nworld\n"
	// batch-1700000001000.txt: "again\n"
}
