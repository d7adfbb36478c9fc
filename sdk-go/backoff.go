package converge

import (
	"math/rand/v2"
	"time"
)

// backoff doubles from min to max. Escalation uses the raw value; only the returned sleep
// is jittered (±25 %), so jitter never compounds.
type backoff struct {
	min, max, current time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	if max < min {
		max = min
	}
	return &backoff{min: min, max: max, current: min}
}

// reset goes back to min, after a healthy session.
func (b *backoff) reset() { b.current = b.min }

// next is the next sleep (current ±25 %), escalating the raw value for the one after.
func (b *backoff) next() time.Duration {
	base := b.current
	b.current = min(b.current*2, b.max)
	return time.Duration(float64(base) * (0.75 + 0.5*rand.Float64()))
}
