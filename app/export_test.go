package app

import (
	"context"
	"fmt"
	"strings"
)

// MetricsAddr is the address /metrics listens on when OWED_METRICS_ADDR is set (with the port
// chosen when it asked for 0), once serving; "" otherwise.
func (a *App) MetricsAddr() string { return a.metricsAddr }

// SettingsTable is the README's table of settings, made from Settings (a test keeps the
// README in step).
func SettingsTable() string {
	var b strings.Builder
	b.WriteString("| variable | flag | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, s := range Settings {
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s |\n", s.Env, s.FlagName(), s.Default, s.Usage)
	}
	return b.String()
}

// ShutdownWith stops a as Shutdown does, with extra stoppers run in the named stages ("http",
// "cron", "runners", "notifier", "database") beside that stage's own.
func (a *App) ShutdownWith(ctx context.Context, extra map[string]func(context.Context) error) error {
	stages := a.stages()
	for i := range stages {
		if stop, ok := extra[stages[i].name]; ok {
			stages[i].stops = append(stages[i].stops, stop)
		}
	}
	return stopInStages(ctx, stages...)
}
