//go:build !race

package deadletter_test

// raceOn says the race detector is on (see race_on_test.go).
const raceOn = false
