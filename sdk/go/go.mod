module github.com/trainyard/trainyard/sdk/go

go 1.26.8
