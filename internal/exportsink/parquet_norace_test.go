//go:build !race

package exportsink_test

const raceDetector = false
