// Package validate holds the tests of Trainyard's deployment files (run by
// `make deploy-validate`): the Kubernetes manifests rendered by kustomize,
// the Compose file loaded by compose-go, the Dockerfile through BuildKit's
// parser and build checks, and the systemd units through systemd-analyze,
// each checked against the flags and environment variables that
// cmd/trainyard really defines (package cliflags).
package validate
