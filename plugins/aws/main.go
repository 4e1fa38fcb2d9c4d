// Command krops-provider-aws is the krops provider plugin for the aws
// environment (EKS clusters through Cluster API's AWS provider, CAPA).
package main

import (
	"github.com/kropsdev/krops/plugins/aws/internal/awsprovider"
	"github.com/kropsdev/krops/plugins/sdk"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	sdk.Serve(awsprovider.New(version, awsprovider.Options{FirstPoll: awsprovider.DefaultFirstPoll, PollInterval: awsprovider.DefaultPollInterval}), sdk.ServeOptions{})
}
