package main

import (
	"context"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/internal/localaws"
)

// load puts n records of size bytes into the stream, spread over its shards.
func load(ctx context.Context, env *localaws.Env, name string, n, size int) error {
	client := env.Kinesis()
	const chunk = 5000
	for lo := 0; lo < n; lo += 4 * chunk {
		g, gctx := errgroup.WithContext(ctx)
		for c := lo; c < min(lo+4*chunk, n); c += chunk {
			hi := min(c+chunk, n)
			g.Go(func() error {
				recs := make([][]byte, hi-c)
				for i := range recs {
					b := make([]byte, size)
					copy(b, strconv.Itoa(c+i))
					recs[i] = b
				}
				return localaws.PutRecordsOn(gctx, client, name, recs, func(i int) string { return strconv.Itoa(c + i) })
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}
