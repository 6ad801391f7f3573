// Command hexagonal_3p is the k-in-a-row game plugin for hexagonal with 3 players.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import kinrowplugin "github.com/trainyard/trainyard/plugins/kinrow"

func init() { kinrowplugin.Register("hexagonal_3p") }

func main() {}
