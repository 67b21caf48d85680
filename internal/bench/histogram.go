package bench

import (
	"math"
	"slices"
	"time"
)

// latencyHistogram counts latencies in logarithmic buckets, 2% wide, from
// 10µs to about 2 minutes: percentiles within 2% in bounded memory, and
// histograms of intervals add up to the histogram of a window. counts[i]
// is bucket offset+i; a sample's histogram is compacted to the buckets it
// uses, so a long soak's samples stay small beside what it measures.
type latencyHistogram struct {
	offset int
	counts []int64
}

const (
	histMin    = 10 * time.Microsecond
	histGrowth = 1.02
	histBucket = 830 // histMin * 1.02^830 is about 140s
)

func newLatencyHistogram() *latencyHistogram {
	return &latencyHistogram{counts: make([]int64, histBucket+1)}
}

// add counts d; h must not be compacted.
func (h *latencyHistogram) add(d time.Duration) {
	i := 0
	if d > histMin {
		i = min(int(math.Log(float64(d)/float64(histMin))/math.Log(histGrowth))+1, histBucket)
	}
	h.counts[i]++
}

// compact drops the empty buckets below the first and above the last.
func (h *latencyHistogram) compact() {
	lo := slices.IndexFunc(h.counts, func(c int64) bool { return c != 0 })
	if lo < 0 {
		h.offset, h.counts = 0, nil
		return
	}
	hi := len(h.counts)
	for h.counts[hi-1] == 0 {
		hi--
	}
	h.offset += lo
	h.counts = slices.Clone(h.counts[lo:hi])
}

// merge adds o's counts to h, which must not be compacted.
func (h *latencyHistogram) merge(o *latencyHistogram) {
	for i, c := range o.counts {
		h.counts[o.offset+i] += c
	}
}

func (h *latencyHistogram) total() int64 {
	var n int64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// percentile returns the upper bound of the bucket holding the p-quantile.
func (h *latencyHistogram) percentile(p float64) time.Duration {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(p * float64(n)))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= max(rank, 1) {
			return time.Duration(float64(histMin) * math.Pow(histGrowth, float64(h.offset+i)))
		}
	}
	return time.Duration(float64(histMin) * math.Pow(histGrowth, histBucket))
}
