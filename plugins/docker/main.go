// Command krops-provider-docker is the krops provider plugin for the
// local-host environment (Cluster API's Docker provider on Docker or Podman).
package main

import (
	"github.com/kropsdev/krops/plugins/docker/internal/dockerprovider"
	"github.com/kropsdev/krops/plugins/sdk"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	sdk.Serve(dockerprovider.New(version, dockerprovider.Options{}), sdk.ServeOptions{})
}
