package main

// The algorithms this binary runs besides the built-in ones
// (internal/training/algorithm.go): adding one is its package and its line
// here (docs/architecture.md).
import (
	_ "github.com/trainyard/trainyard/internal/dqn"
	_ "github.com/trainyard/trainyard/internal/training/reinforce"
)
