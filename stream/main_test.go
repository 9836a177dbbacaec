package stream

import (
	"log/slog"
	"os"
	"testing"
)

// TestMain keeps the tests' output readable: a Pipeline without a Logger
// logs to slog.Default(), and the many pipelines started and drained here
// would print their INFO lines; warnings and errors still show.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}
