//go:build !wasip1

package plugin

func httpRequest(req, buf []byte) (code, n int, err error) { return 0, 0, ErrNoHost }
