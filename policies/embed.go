// Package policies holds Trainyard's default admission policies as plain
// Rego (with their unit tests and data.json), embedded so a fresh install
// starts with them. They pass `opa test policies/` unchanged.
package policies

import "embed"

// FS is the default bundle: every *.rego module and data.json here.
//
//go:embed *.rego data.json
var FS embed.FS
