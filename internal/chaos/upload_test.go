package chaos

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"testing"
)

// uploadPlugin pushes a WASM module as admin (multipart field "module").
func uploadPlugin(t *testing.T, p *plane, wasm []byte) {
	t.Helper()
	body, ct := multipartModule(wasm)
	code, _, raw, err := p.do("POST", "/v1/plugins", p.admin, ct, body)
	if err != nil || (code != http.StatusCreated && code != http.StatusOK) {
		t.Fatalf("upload plugin: %d %s %v", code, raw, err)
	}
}

func multipartModule(wasm []byte) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pw, _ := mw.CreatePart(textproto.MIMEHeader{
		"Content-Disposition": {`form-data; name="module"; filename="p.wasm"`},
		"Content-Type":        {"application/wasm"},
	})
	pw.Write(wasm)
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}
