// Package budget names every fixed timeout and interval of the host tools
// in one place, each with what it bounds and why it is the size it is.
// What a user tunes (the reconcile, delete and node timeouts) are knobs in
// kit/config, not here; these are the bounds a user should never need to
// touch, and a wait that runs into one says which. The plugins keep their
// own (plugins/sdk; the container engine's call bound is in
// plugins/sdk/engine), since a plugin depends on the SDK alone.
//
// The budgets nest: one API call (APIRequest) inside a wait (a knob, in
// minutes), inside the run. None retries on its own: a wait re-lists and
// re-watches until its knob runs out, and a step that runs out leaves state
// the rerun resumes from. The one exception is AdmissionWebhook.
package budget

import "time"

// Kubernetes API.
const (
	// APIRequest bounds one call to a cluster's API server. A healthy one
	// answers in milliseconds and a loaded one (kind under a Cluster API
	// install on 2 cores) in a few seconds; past this the server accepted
	// the connection and went quiet, which the caller reports as unknown
	// state instead of waiting for ever.
	APIRequest = 30 * time.Second
	// Probe bounds "is this cluster there?": a question whose "no" the
	// tool acts on at once (a kind cluster's status, the pivot's preflight
	// of the local registry), so it is shorter than a working call.
	Probe = 10 * time.Second
	// KindNodesReady bounds the wait for a kind cluster's nodes: kind's
	// own create waits for the control plane; the CNI and the node's
	// Ready take 10 to 40 s more on 2 cores.
	KindNodesReady = 120 * time.Second
	// AdmissionWebhook bounds how long the teardown tries a deletion
	// again that the API server refused because it could not reach an
	// admission webhook (nothing changed). After the API server was away
	// for half a minute, Cluster API's managers lost their leader leases
	// and restarted, and their webhooks were unreachable for about 30 s
	// (measured on the real engine, 2 cores); four times that is a
	// controller that is not coming back by itself.
	AdmissionWebhook = 2 * time.Minute
)

// Helm.
const (
	// HelmHooks bounds a chart's hooks when its release is not waited for
	// (the install of a CRD chart, an uninstall): hooks are short jobs,
	// and one that runs for minutes is stuck.
	HelmHooks = 5 * time.Minute
)

// OCI registry.
const (
	// RegistryPush bounds the push of a configuration artifact (tens of
	// kilobytes): a push that takes longer is a registry that accepted the
	// connection and stopped answering.
	RegistryPush = 2 * time.Minute
	// RegistryResponse bounds the wait for one response's headers:
	// go-containerregistry's transport has no such bound, so its
	// plain-HTTP fallback waited without end on a silent registry.
	RegistryResponse = 30 * time.Second
)

// GitHub.
const (
	// GitHubConnect and GitHubCall bound the preflight's check of a
	// repository token: one small request to an API that answers in
	// hundreds of milliseconds.
	GitHubConnect = 10 * time.Second
	GitHubCall    = 30 * time.Second
)

// Progress.
const (
	// ProgressTick is how often a running step's elapsed time is redrawn
	// on a terminal: often enough to look alive, rarely enough to cost
	// nothing.
	ProgressTick = 100 * time.Millisecond
)
