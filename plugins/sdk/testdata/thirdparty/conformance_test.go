package main

import (
	"testing"

	"github.com/kropsdev/krops/plugins/sdk/sdkconformance"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

func TestConformance(t *testing.T) {
	bin := sdktest.Build(t, ".", "acme")
	sdkconformance.Run(t, bin, sdkconformance.Options{Env: map[string]string{"ACME_REGION": "eu-north-1"}})
}
