package converge

import (
	"math/rand/v2"
	"time"
)

// backoff doubles from min to max. Escalation uses the raw value; only the returned sleep
// is jittered (±25 %, never above max), so jitter never compounds.
type backoff struct {
	min, max, current time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	if max < min {
		max = min
	}
	return &backoff{min: min, max: max, current: min}
}

// reset goes back to min, after a healthy session or a recovery.
func (b *backoff) reset() { b.current = b.min }

// next is the next sleep, escalating the raw value for the one after: uniform in
// [current × 0.75, current × 1.25], the upper end clipped at max. Clipping the range rather
// than the drawn value keeps the sleeps at the ceiling spread out (workers that lost the
// same broker do not all come back in the same instant) and never above it.
func (b *backoff) next() time.Duration {
	base := b.current
	b.current = min(b.current*2, b.max)
	lo := float64(base) * 0.75
	hi := min(float64(base)*1.25, float64(b.max))
	return time.Duration(lo + (hi-lo)*rand.Float64())
}
