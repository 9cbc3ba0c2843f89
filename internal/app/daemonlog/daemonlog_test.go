package daemonlog

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	l, err := New("warn")
	if err != nil {
		t.Fatal(err)
	}
	if l.Enabled(context.Background(), slog.LevelInfo) || !l.Enabled(context.Background(), slog.LevelWarn) {
		t.Fatal("level warn not applied")
	}
	if _, err := New("loud"); err == nil || !strings.Contains(err.Error(), "-log-level") {
		t.Fatalf("bad level: %v", err)
	}
}
