package localaws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// stdinWatch, put before each launcher, ends the server when its stdin
// reaches end of file. startProcess gives the server a pipe whose write end
// only the Go process holds, so the pipe closes when that process exits for
// any reason, kill -9 included: a server never outlives the program that
// started it, on every platform (Linux also has the parent-death signal).
const stdinWatch = `
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
`

// nodeLauncher starts kinesalite or dynalite from Node with its listen call
// bound to 127.0.0.1 (kinesalite's CLI has no host flag), prints readyMarker
// once listening, and exits with portInUseExit when the port is taken.
// argv: module path, options as JSON, port.
//
// kinesalite and dynalite rethrow the "aborted" error of a request whose
// client hung up before sending all of it, which kills the server. A client
// hanging up is normal (a cancelled context does it), so the launcher logs
// and survives that one error; any other uncaught error still ends it.
//
// kinesalite never answers GetShardIterator AT_TIMESTAMP on a shard that
// holds no record at or after the time: its read of the shard ends without
// calling back, and the client waits for its timeout. Kinesis returns the
// iterator of the next record to arrive (the Timestamp parameter: "If a
// record with this exact time stamp does not exist, the iterator returned
// is for the next (later) record"), and weir asks for AT_TIMESTAMP on a
// quiet shard whenever a lease starts at LATEST, the default. The launcher
// wraps kinesalite's action: such a request gets the iterator LATEST gives,
// resolved before the shard is read, so that no record put meanwhile is
// skipped; any other request goes to kinesalite as it is.
const nodeLauncher = `
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error('localaws launcher: a client aborted a request');
    return;
  }
  console.error(err);
  process.exit(1);
});
const [mod, opts, port] = process.argv.slice(1);
(function answerAtTimestamp() {
  let file;
  try { file = require.resolve(mod + '/actions/getShardIterator'); } catch (e) { return; } // not kinesalite
  const db = require(mod + '/db');
  const original = require(file);
  require.cache[file].exports = function getShardIterator(store, data, cb) {
    let shardIx;
    try { shardIx = db.resolveShardId(data.ShardId).shardIx; } catch (e) { shardIx = -1; }
    if (data.ShardIteratorType !== 'AT_TIMESTAMP' || data.Timestamp == null || data.StartingSequenceNumber != null ||
        data.Timestamp * 1000 > Date.now() || shardIx < 0) {
      return original(store, data, cb);
    }
    const latest = Object.assign({}, data, { ShardIteratorType: 'LATEST' });
    delete latest.Timestamp;
    original(store, latest, (err, res) => {
      if (err) return original(store, data, cb);
      let done = false;
      const finish = (later) => {
        if (done) return;
        done = true;
        if (later) original(store, data, cb); else cb(null, res);
      };
      const rs = store.getStreamDb(data.StreamName).createReadStream({ gt: db.shardIxToHex(shardIx), lt: db.shardIxToHex(shardIx + 1) });
      rs.on('data', (item) => {
        if (item.value.ApproximateArrivalTimestamp >= data.Timestamp) { finish(true); rs.destroy(); }
      });
      rs.on('end', () => finish(false));
      rs.on('close', () => finish(false));
      rs.on('error', (e) => { if (!done) { done = true; cb(e); } });
    });
  };
})();
const server = require(mod)(JSON.parse(opts));
server.on('error', (err) => {
  console.error('localaws launcher: ' + (err.code || '') + ' ' + err.message);
  process.exit(err.code === 'EADDRINUSE' ? 98 : 1); // 98 is portInUseExit
});
server.listen(Number(port), '127.0.0.1', () => console.log('` + readyMarker + `'));
`

// mockLauncher runs kinesis-mock's main.js with every server it creates bound
// to 127.0.0.1 (kinesis-mock has no host setting and would listen on all
// interfaces), and prints readyMarker once this process listens on the plain
// port: a dial would also succeed if another process had taken the port.
// argv: path of main.js, plain port.
const mockLauncher = `
const net = require('net');
const [main, port] = process.argv.slice(1);
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  } else if (args[0] && typeof args[0] === 'object' && !args[0].host) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  this.once('listening', () => {
    const a = this.address();
    if (a && a.port === Number(port)) console.log('` + readyMarker + `');
  });
  return listen.apply(this, args);
};
process.argv.splice(1, 2, main);
require(main);
`

// kind is one of the servers this package can start.
type kind int

const (
	kindKinesis kind = iota
	kindDynamoDB
	kindKinesisMock
	numKinds // the number of kinds above
)

// String names the server program.
func (k kind) String() string {
	switch k {
	case kindKinesis:
		return "kinesalite"
	case kindDynamoDB:
		return "dynalite"
	default:
		return "kinesis-mock"
	}
}

// envVar is the environment variable that supplies this server's endpoint.
func (k kind) envVar() string {
	switch k {
	case kindKinesis:
		return EnvKinesisEndpoint
	case kindDynamoDB:
		return EnvDynamoDBEndpoint
	default:
		return EnvKinesisMockEndpoint
	}
}

// wanted reports whether opts asks for this server.
func (k kind) wanted(opts Options) bool {
	switch k {
	case kindKinesis:
		return opts.Kinesis
	case kindDynamoDB:
		return opts.DynamoDB
	default:
		return opts.KinesisMock
	}
}

// launch builds the command that serves k on port. dataDir is "" for an
// in-memory server, else the folder this server persists to.
func (k kind) launch(node, root, dataDir string, port int) (launch, error) {
	l := launch{name: k.String(), node: node, dir: root, port: port, grace: stopGrace}
	modules := filepath.Join(root, "node_modules")
	switch k {
	case kindKinesis, kindDynamoDB:
		var opts map[string]any
		if k == kindKinesis {
			// The shard limit counts every stream the server ever held: a
			// package's tests share one server and make a stream each, and
			// -count=N repeats them, so AWS's default of 200 runs out.
			opts = map[string]any{"createStreamMs": 0, "deleteStreamMs": 0, "updateStreamMs": 0, "shardLimit": 20000}
		} else {
			opts = map[string]any{"createTableMs": 0, "deleteTableMs": 0, "updateTableMs": 0}
		}
		if dataDir != "" {
			opts["path"] = dataDir
		}
		js, err := json.Marshal(opts)
		if err != nil {
			return launch{}, fmt.Errorf("localaws: encode %s options: %w", k, err)
		}
		l.args = []string{"-e", stdinWatch + nodeLauncher, filepath.Join(modules, k.String()), string(js), strconv.Itoa(port)}
	case kindKinesisMock:
		tlsPort, err := freePort()
		if err != nil {
			return launch{}, err
		}
		l.args = []string{"-e", stdinWatch + mockLauncher, filepath.Join(modules, "kinesis-local", "main.js"), strconv.Itoa(port)}
		l.env = kinesisMockEnv(modules, dataDir, port, tlsPort)
		if dataDir == "" {
			l.grace = mockGrace
		}
	}
	return l, nil
}

// kinesisMockEnv configures kinesis-mock: instant state changes, 200 shards,
// quiet logs, and optional JSON snapshots every second under dataDir.
func kinesisMockEnv(modules, dataDir string, port, tlsPort int) []string {
	env := []string{
		"KINESIS_MOCK_CERT_PATH=" + filepath.Join(modules, "kinesis-local", "server.json"),
		"KINESIS_MOCK_PLAIN_PORT=" + strconv.Itoa(port),
		"KINESIS_MOCK_TLS_PORT=" + strconv.Itoa(tlsPort),
		"SHARD_LIMIT=200",
		"LOG_LEVEL=WARN",
		"AWS_REGION=" + Region,
	}
	for _, v := range []string{
		"CREATE_STREAM_DURATION", "DELETE_STREAM_DURATION", "SPLIT_SHARD_DURATION",
		"MERGE_SHARDS_DURATION", "UPDATE_SHARD_COUNT_DURATION", "UPDATE_STREAM_MODE_DURATION",
		"REGISTER_STREAM_CONSUMER_DURATION", "DEREGISTER_STREAM_CONSUMER_DURATION",
		"START_STREAM_ENCRYPTION_DURATION", "STOP_STREAM_ENCRYPTION_DURATION",
	} {
		env = append(env, v+"=0ms")
	}
	if dataDir != "" {
		env = append(env, "SHOULD_PERSIST_DATA=true", "LOAD_DATA_IF_EXISTS=true",
			"PERSIST_PATH="+dataDir, "PERSIST_INTERVAL=1s")
	} else {
		env = append(env, "SHOULD_PERSIST_DATA=false", "LOAD_DATA_IF_EXISTS=false")
	}
	return env
}

// startServer starts k on a free port, retrying when another process takes
// the port first, and returns the process and its endpoint.
func startServer(ctx context.Context, k kind, node, root, dataDir string, logger *slog.Logger) (*process, string, error) {
	if dataDir != "" {
		dataDir = filepath.Join(dataDir, k.String())
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, "", fmt.Errorf("localaws: data dir for %s: %w", k, err)
		}
	}
	const attempts = 3
	var err error
	for range attempts {
		var port int
		if port, err = freePort(); err != nil {
			return nil, "", err
		}
		var l launch
		if l, err = k.launch(node, root, dataDir, port); err != nil {
			return nil, "", err
		}
		began := time.Now()
		var p *process
		p, err = startProcess(ctx, l, logger)
		if err == nil {
			endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
			logger.Debug("localaws: server ready", "server", k.String(), "endpoint", endpoint,
				"pid", p.pid, "took", time.Since(began))
			return p, endpoint, nil
		}
		if !errors.Is(err, errPortInUse) {
			return nil, "", err
		}
		logger.Debug("localaws: port taken, retrying", "server", k.String(), "port", port)
	}
	return nil, "", err
}
