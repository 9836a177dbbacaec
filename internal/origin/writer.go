package origin

import "crypto/rand"

// RandomWriterLen is the length of RandomWriter's names.
const RandomWriterLen = 16

// RandomWriter returns a random name for a writer whose worker has none
// (RandomWriterLen characters of base32, 80 bits): the writers of one
// fleet never share it.
func RandomWriter() string { return rand.Text()[:RandomWriterLen] }
