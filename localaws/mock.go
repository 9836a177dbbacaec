package localaws

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/eventstream"
)

// initialResponse is the HTTP client of kinesis-mock clients. kinesis-mock
// starts a SubscribeToShard event stream with a SubscribeToShardEvent, while
// the SDK expects an initial-response message first and fails without one;
// initialResponse prepends that message. Other responses pass untouched.
type initialResponse struct{ next aws.HTTPClient }

// Do implements aws.HTTPClient.
func (c initialResponse) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK ||
		!strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".SubscribeToShard") {
		return resp, err
	}
	var first bytes.Buffer
	msg := eventstream.Message{Payload: []byte("{}")}
	msg.Headers.Set(":message-type", eventstream.StringValue("event"))
	msg.Headers.Set(":event-type", eventstream.StringValue("initial-response"))
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	if err := eventstream.NewEncoder().Encode(&first, msg); err != nil {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("localaws: encode initial-response for kinesis-mock: %w", err)
	}
	resp.Body = prepended{Reader: io.MultiReader(&first, resp.Body), Closer: resp.Body}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// prepended is a response body with bytes put in front of it.
type prepended struct {
	io.Reader
	io.Closer
}
