// Command recordhistory saves a workflow's full history as JSON, the input
// of the replay tests that guard workflow code against non-deterministic
// changes:
//
//	go run ./internal/tools/recordhistory -address 127.0.0.1:7233 -id WORKFLOW_ID > testdata/history.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	addr := flag.String("address", "127.0.0.1:7233", "Temporal frontend")
	ns := flag.String("namespace", "default", "namespace")
	id := flag.String("id", "", "workflow id")
	flag.Parse()
	if err := run(*addr, *ns, *id); err != nil {
		fmt.Fprintln(os.Stderr, "recordhistory:", err)
		os.Exit(1)
	}
}

func run(addr, ns, id string) error {
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns})
	if err != nil {
		return err
	}
	defer c.Close()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(b, '\n'))
	return err
}
