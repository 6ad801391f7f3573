// Command hexagonal_2p is the k-in-a-row game plugin for hexagonal with 2 players.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import kinrowplugin "github.com/trainyard/trainyard/plugins/kinrow"

func init() { kinrowplugin.Register("hexagonal_2p") }

func main() {}
