// Package tracetree holds the end-to-end test that one training run is
// one trace: the API request, the Train workflow, its activities on the
// control worker and on the node's agent, the segments, plugin loads and
// checkpoint saves inside them, all linked parent to child. Everything runs
// in the test's process (embedded Temporal and S3, the real API, workers
// and an agent worker) so an in-memory exporter sees every span.
package tracetree
