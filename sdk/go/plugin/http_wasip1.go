//go:build wasip1

package plugin

import (
	"runtime"
	"unsafe"
)

// The import exists in a module only when the plugin calls HTTP or Chat
// (the linker drops unreachable imports), so plugins without the http
// capability load without the grant.
//
//go:wasmimport trainyard http_request
func trainyardHTTPRequest(reqPtr, reqLen, respPtr, respCap uint32) uint64

func httpRequest(req, buf []byte) (code, n int, err error) {
	var rp, bp uint32
	if len(req) > 0 {
		rp = uint32(uintptr(unsafe.Pointer(&req[0])))
	}
	if len(buf) > 0 {
		bp = uint32(uintptr(unsafe.Pointer(&buf[0])))
	}
	r := trainyardHTTPRequest(rp, uint32(len(req)), bp, uint32(len(buf)))
	runtime.KeepAlive(req)
	runtime.KeepAlive(buf)
	return int(int32(uint32(r >> 32))), int(uint32(r)), nil
}
