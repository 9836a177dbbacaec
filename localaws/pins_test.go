package localaws

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestPinsMatchTheRepository checks that the embedded package.json and lock
// file are those at the repository's root, which weir's own tests install.
func TestPinsMatchTheRepository(t *testing.T) {
	for _, name := range []string{"package.json", "package-lock.json"} {
		want, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := pins.ReadFile("npm/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("localaws/npm/%s differs from ../%s: copy it over (cp %[2]s localaws/npm/)", name, name)
		}
	}
}

func TestWritePins(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	for range 2 { // the second time finds them in place
		if err := writePins(dir, []byte("manifest"), []byte("lock")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writePins(dir, []byte("manifest"), []byte("lock")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = string(b)
	}
	if len(got) != 2 || got["package.json"] != "manifest" || got["package-lock.json"] != "lock" {
		t.Errorf("folder holds %v, want package.json and package-lock.json rewritten, no temporary file", got)
	}
}

// TestForTestWithDir starts the servers from the repository's installed
// packages and uses them.
func TestForTestWithDir(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	env := ForTest(t, Options{Kinesis: true, DynamoDB: true, Dir: root})
	ctx := t.Context()
	if err := env.CreateStream(ctx, "words", 1); err != nil {
		t.Fatal(err)
	}
	if err := env.PutRecords(ctx, "words", [][]byte{[]byte("hello")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DynamoDB().ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
}
