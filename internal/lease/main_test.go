package lease

import (
	"os"
	"testing"

	"github.com/weirstream/weir/internal/localaws"
)

// servers is one dynalite for every test of the package that needs DynamoDB.
var servers = localaws.NewShared(localaws.Options{DynamoDB: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }
