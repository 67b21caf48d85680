package access

import (
	"sync"
	"time"
)

// RateLimits bound how fast one address and one credential may call the
// routes that need a credential, and how many failed authentications an
// address gets before it must wait. Public routes are not limited here:
// the log's tiles are immutable and belong behind a cache.
type RateLimits struct {
	// PerAddress and PerCredential are sustained requests per second,
	// with bursts of twice that; 0 means DefaultRatePerSecond, a negative
	// value no limit.
	PerAddress, PerCredential float64
	// FailuresPerMinute is how many failed authentications an address
	// regains per minute, with bursts of FailureBurst; 0 means 10 a minute
	// and bursts of 10, a negative value no limit.
	FailuresPerMinute float64
	FailureBurst      float64
}

// DefaultRatePerSecond is the default sustained request rate per address
// and per credential.
const DefaultRatePerSecond = 100

func (rl RateLimits) withDefaults() RateLimits {
	if rl.PerAddress == 0 {
		rl.PerAddress = DefaultRatePerSecond
	}
	if rl.PerCredential == 0 {
		rl.PerCredential = DefaultRatePerSecond
	}
	if rl.FailuresPerMinute == 0 {
		rl.FailuresPerMinute = 10
	}
	if rl.FailureBurst <= 0 {
		rl.FailureBurst = 10
	}
	return rl
}

// limiter is a set of token buckets, one per key.
type limiter struct {
	rate, burst float64 // tokens per second; rate < 0: unlimited
	now         func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the limiter's memory; past it, buckets that have
// refilled are dropped (they hold nothing a fresh one would not).
const maxBuckets = 10000

func newLimiter(rate, burst float64, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: burst, now: now, buckets: make(map[string]*bucket)}
}

// refill returns key's bucket brought up to now.
func (l *limiter) refill(key string) *bucket {
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
		return b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	return b
}

func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// wait is how long until the bucket holds one token.
func (l *limiter) wait(b *bucket) time.Duration {
	return time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// take spends one token of key's bucket, or says how long to wait.
func (l *limiter) take(key string) (bool, time.Duration) { return l.use(key, true) }

// peek reports whether key's bucket holds a token, without spending it.
func (l *limiter) peek(key string) (bool, time.Duration) { return l.use(key, false) }

// use checks that key's bucket holds a token, spending it when spend is
// set, or says how long to wait.
func (l *limiter) use(key string, spend bool) (bool, time.Duration) {
	if l.rate < 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(key)
	if b.tokens < 1 {
		return false, l.wait(b)
	}
	if spend {
		b.tokens--
	}
	return true, 0
}
