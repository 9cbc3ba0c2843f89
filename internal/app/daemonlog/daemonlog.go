// Package daemonlog is the daemons' logger: JSON lines on standard error,
// at the level their -log-level flag names.
package daemonlog

import (
	"fmt"
	"log/slog"
	"os"
)

// New returns the logger for level ("debug", "info", "warn" or "error").
func New(level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv})), nil
}
