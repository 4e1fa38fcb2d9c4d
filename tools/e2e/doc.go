// Package e2e holds the end-to-end test of the local-host lifecycle
// (`task e2e`): bootstrap, pivot and teardown through the krops binaries and
// tasks users run, against the real Flux, Flux Operator and Cluster API
// controllers. docs/testing.md says what is real and what stands in.
package e2e
