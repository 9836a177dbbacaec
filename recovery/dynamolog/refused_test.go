package dynamolog_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery/dynamolog"
)

// TestRefusedAppendNamesTheFix: an append DynamoDB refuses for good (the
// log's table deleted while the pipeline ran, dynalite; PutItem not
// allowed, injected) fails saying it was refused, with the table and the
// fix. Before, it said the put "may or may not have taken effect" and to
// close and reopen the log, which a refusal (nothing was written) does
// not call for, and which cannot help a deleted table.
func TestRefusedAppendNamesTheFix(t *testing.T) {
	env, tr, cfg := faultyLog(t)
	for _, c := range []struct {
		name   string
		refuse func(cfg dynamolog.Config)
		want   []string
	}{
		{"table deleted", func(cfg dynamolog.Config) {
			if _, err := env.DynamoDB().DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(cfg.Table)}); err != nil {
				t.Fatal(err)
			}
		}, []string{"refused", "no longer exists", "deleted", "fix:", "restore"}},
		{"access denied", func(dynamolog.Config) {
			if err := tr.SetRules(faults.Rule{Operation: "PutItem", Kind: faults.AccessDenied}); err != nil {
				t.Fatal(err)
			}
		}, []string{"refused", "fix:", "dynamodb:PutItem", "docs/iam/dynamodb-log.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := tr.SetRules(); err != nil {
				t.Fatal(err)
			}
			cfg := cfg
			cfg.Table, cfg.Name = localaws.UniqueName(t), localaws.UniqueName(t)
			l := openDynamo(t, cfg)
			logtest.MustAppend(t, l, block(0, 0))
			c.refuse(cfg)
			err := l.Append(t.Context(), block(0, 1))
			if err == nil {
				t.Fatal("Append refused by DynamoDB returned nil")
			}
			for _, w := range append(c.want, cfg.Table) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Append = %v\nwant it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "may or may not") {
				t.Errorf("Append = %v\nsays a refused put may have taken effect", err)
			}
		})
	}
}
