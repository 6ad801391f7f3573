// Command hex8_3p is the k-in-a-row game plugin for hex8 with 3 players.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import kinrowplugin "github.com/trainyard/trainyard/plugins/kinrow"

func init() { kinrowplugin.Register("hex8_3p") }

func main() {}
