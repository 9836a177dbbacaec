package dynamosafe_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/dynamosafe"
)

// getter is a client with GetItem only, which panics on key "bad".
type getter struct{}

func (getter) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if aws.ToString(in.TableName) == "bad" {
		panic("wrapper bug")
	}
	return &dynamodb.GetItemOutput{}, nil
}

func TestWrap(t *testing.T) {
	c := dynamosafe.Wrap(getter{})
	if out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("good")}); out == nil || err != nil {
		t.Errorf("GetItem = %v, %v; want the client's answer", out, err)
	}
	_, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("bad")})
	for _, want := range []string{"the DynamoDB client panicked in GetItem: panic: wrapper bug", "getter.GetItem", "dynamosafe_test.go"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("GetItem of a panicking client = %v, want an error containing %q", err, want)
		}
	}
	if !awserr.Refused(err) {
		t.Errorf("awserr.Refused(%v) = false: retry loops would try a panicking client forever", err)
	}
	if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{}); err == nil || !strings.Contains(err.Error(), "has no PutItem method") {
		t.Errorf("PutItem of a client without it = %v, want an error naming the method", err)
	}
}
