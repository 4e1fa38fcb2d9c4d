// Command krops-provider-aws is the krops provider plugin for the aws
// environment (EKS clusters through Cluster API's AWS provider, CAPA).
package main

import (
	"time"

	"github.com/kropsdev/krops/plugins/aws/internal/awsprovider"
	"github.com/kropsdev/krops/plugins/sdk"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	// Asynchronous deletions take minutes on AWS; polling every 10 s keeps
	// the sweep responsive without spending API calls.
	sdk.Serve(awsprovider.New(version, awsprovider.Options{PollInterval: 10 * time.Second}), sdk.ServeOptions{})
}
