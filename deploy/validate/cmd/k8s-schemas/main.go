// Command k8s-schemas writes kubeconform schemas (plain and strict) for the
// Kubernetes version built into kustomize's kyaml:
//
//	go run ./cmd/k8s-schemas -out DIR
//	kubeconform -strict -kubernetes-version 1.21.2 -schema-location DIR manifests.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/trainyard/trainyard/deploy/validate/k8sschema"
)

func main() {
	out := flag.String("out", "", "directory to write <version>-standalone[-strict]/ into")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "k8s-schemas: -out is required")
		os.Exit(2)
	}
	defs, version, err := k8sschema.Builtin()
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-schemas:", err)
		os.Exit(1)
	}
	for _, strict := range []bool{false, true} {
		n, err := k8sschema.Write(*out, version, defs, strict)
		if err != nil {
			fmt.Fprintln(os.Stderr, "k8s-schemas:", err)
			os.Exit(1)
		}
		fmt.Printf("k8s-schemas: %d kinds of Kubernetes %s in %s/%s\n", n, version, *out, k8sschema.DirName(version, strict))
	}
}
