package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/localaws"
)

// updatingTransport reports every table DescribeTable describes as
// UPDATING (its capacity or billing mode being changed, an index being
// built, which lasts up to an hour): dynalite updates a table at once.
type updatingTransport struct{}

func (updatingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".DescribeTable") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = bytes.ReplaceAll(body, []byte(`"TableStatus":"ACTIVE"`), []byte(`"TableStatus":"UPDATING"`))
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Length")
	resp.Header.Del("X-Amz-Crc32")
	return resp, nil
}

// TestOpenCountTableUpdating checks, on dynalite, that an existing count
// table that is UPDATING, which serves reads and writes, is used at once,
// not waited for until it is ACTIVE (up to five minutes, then failing).
func TestOpenCountTableUpdating(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	logger := slog.New(slog.DiscardHandler)
	if _, err := openCountTable(t.Context(), env.DynamoDB(), "counts", logger); err != nil {
		t.Fatal(err)
	}
	db := env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: updatingTransport{}} })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a guard, not a measure
	defer cancel()
	if _, err := openCountTable(ctx, db, "counts", logger); err != nil {
		t.Fatalf("openCountTable of an UPDATING table: %v", err)
	}
}
