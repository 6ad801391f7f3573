// Package assemblyscript carries the AssemblyScript guest SDK's files for
// `trainyard plugin init`: the SDK itself (assembly/), the npm manifest and
// lock that pin the AssemblyScript compiler, and the template plugin. It is
// Go only so the trainyard binary can embed them; plugins never import it.
package assemblyscript

import "embed"

// Files holds package.json, package-lock.json, assembly/*.ts and
// template/assembly/index.ts.
//
//go:embed package.json package-lock.json assembly template/assembly
var Files embed.FS
