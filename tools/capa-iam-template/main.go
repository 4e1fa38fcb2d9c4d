// Command capa-iam-template renders the IAM CloudFormation template of
// Cluster API Provider AWS, with CAPA's own code at the version the trees
// pin and its default configuration, the template `clusterawsadm bootstrap
// iam create-cloudformation-stack` sends, into the file krops-aws embeds.
// It is written as JSON, which CloudFormation reads as it reads
// clusterawsadm's YAML: JSON leaves no value to a YAML reader's guess (an
// unquoted 2012-10-17 is a date to some, which moto's server fails on).
//
// It is its own module, outside go.work: CAPA's module graph (aws-sdk-go
// v1, goformation, an older Cluster API) would otherwise join every krops
// binary's build list. Renovate bumps the version in go.mod with the trees'
// provider; `task aws-template` then rewrites the file, and krops-aws's
// TestTheTemplateIsCAPAs fails until it has.
//
//	go run . FILE          write the template to FILE
//	go run . -check FILE   exit 1 when FILE differs from the template
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/cluster-api-provider-aws/v2/cmd/clusterawsadm/cloudformation/bootstrap"
)

func main() {
	check := flag.Bool("check", false, "compare FILE with the template instead of writing it")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: capa-iam-template [-check] FILE")
		os.Exit(2)
	}
	file := flag.Arg(0)
	body, err := bootstrap.NewTemplate().RenderCloudFormation().JSON()
	if err != nil {
		fmt.Fprintf(os.Stderr, "rendering CAPA's IAM template: %v\n", err)
		os.Exit(1)
	}
	want := append(body, '\n')
	if !*check {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	got, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if !bytes.Equal(got, want) {
		fmt.Fprintf(os.Stderr, "%s is not the template CAPA renders at the version tools/capa-iam-template/go.mod pins: run `task aws-template`\n", file)
		os.Exit(1)
	}
}
