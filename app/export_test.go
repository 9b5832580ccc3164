package app

import "context"

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
