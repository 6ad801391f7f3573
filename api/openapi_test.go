package api

import (
	"bytes"
	"os"
	"testing"
)

// TestOpenAPIUpToDate fails when the checked-in openapi.yaml drifts from
// the routes and types in code.
func TestOpenAPIUpToDate(t *testing.T) {
	want, err := OpenAPIYAML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("openapi.yaml is out of date with the API: run `make openapi` and commit the result")
	}
}
