// Package sdk is the root of the Go guest SDK module
// (github.com/trainyard/trainyard/sdk/go): plugin (the ABI v1 guest side),
// envs (spaces, specs and the reference environments cartpole, pendulum and
// native) and games/kinrow (the k-in-a-row rules). The module requires
// nothing, so a plugin's build graph is its own code, this module and the
// standard library.
//
// The module is not published on a module proxy: Files carries its sources,
// and `trainyard plugin init` writes them into a new plugin project
// (third_party/trainyard-sdk-go, used through a go.mod replace), which then
// builds anywhere without network.
package sdk

import "embed"

// Files is this module's go.mod and the sources of its packages (tests
// included; plugin init leaves them out).
//
//go:embed go.mod *.go plugin envs games
var Files embed.FS
