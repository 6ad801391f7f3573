// Command hexagonal_4p is the k-in-a-row game plugin for hexagonal with 4 players.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import kinrowplugin "github.com/trainyard/trainyard/plugins/kinrow"

func init() { kinrowplugin.Register("hexagonal_4p") }

func main() {}
