package leasetable

import "errors"

// ErrInvalidConfig is wrapped by the error a constructor returns for a bad
// configuration; the wrapped errors name each bad field and its fix.
var ErrInvalidConfig = errors.New("leasetable: invalid config")
