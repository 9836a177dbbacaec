//go:build !unix

package files

func setUmask(int) {}
