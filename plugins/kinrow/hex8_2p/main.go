// Command hex8_2p is the k-in-a-row game plugin for hex8 with 2 players.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import kinrowplugin "github.com/trainyard/trainyard/plugins/kinrow"

func init() { kinrowplugin.Register("hex8_2p") }

func main() {}
