// Command square19_3p is the k-in-a-row game plugin for square19 with 3 players.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import kinrowplugin "github.com/trainyard/trainyard/plugins/kinrow"

func init() { kinrowplugin.Register("square19_3p") }

func main() {}
