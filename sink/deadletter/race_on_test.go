//go:build race

package deadletter_test

// raceOn says the race detector is on: its sync.Pool drops what is put
// back at random, so json's encoder makes a new buffer for most letters.
const raceOn = true
