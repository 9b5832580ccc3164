//go:build race

package media

// raceDetector: the race detector's shadow memory multiplies a process's resident memory, so
// peak-RSS bounds are checked only without it (.ci/run runs them so).
const raceDetector = true
