package main

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{}, defaultGCPercent},
		{map[string]string{"GOGC": "100"}, 100},
		{map[string]string{"GOMEMLIMIT": "512MiB"}, 100},
	} {
		debug.SetGCPercent(100)
		tuneGC(func(k string) string { return tc.env[k] })
		if got := debug.SetGCPercent(100); got != tc.want {
			t.Errorf("env %v: GC percent %d, want %d", tc.env, got, tc.want)
		}
	}
}
