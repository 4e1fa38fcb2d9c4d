package awstest

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// Inventory lists what exists through endpoint in regions, as sorted
// "region kind id tags" lines: VPCs, subnets, internet and NAT gateways,
// Elastic IPs, route tables, security groups, EKS clusters, CloudFormation
// stacks, and (under "global") IAM roles, instance profiles, customer
// managed policies and OpenID Connect providers. It reads the account as anyone would, not through
// krops, so a test can compare the account before and after a program
// without trusting that program's own report. Deleted NAT gateways and
// stacks are left out (AWS lists them for a while).
func Inventory(t testing.TB, endpoint string, regions []string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	add := func(region, kind, id string, tags map[string]string) {
		var kv []string
		for k, v := range tags {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		out = append(out, region+" "+kind+" "+id+" "+strings.Join(kv, ","))
	}
	fail := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("inventory: %s: %v", what, err)
		}
	}
	for _, region := range regions {
		ec := ec2.NewFromConfig(config(t, endpoint, region))
		vpcs, err := ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
		fail("DescribeVpcs "+region, err)
		for _, v := range vpcs.Vpcs {
			add(region, "vpc", aws.ToString(v.VpcId)+" "+aws.ToString(v.CidrBlock), ec2Tags(v.Tags))
		}
		subnets, err := ec.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
		fail("DescribeSubnets "+region, err)
		for _, s := range subnets.Subnets {
			add(region, "subnet", aws.ToString(s.SubnetId), ec2Tags(s.Tags))
		}
		igws, err := ec.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{})
		fail("DescribeInternetGateways "+region, err)
		for _, g := range igws.InternetGateways {
			add(region, "internet-gateway", aws.ToString(g.InternetGatewayId), ec2Tags(g.Tags))
		}
		nats, err := ec.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{})
		fail("DescribeNatGateways "+region, err)
		for _, n := range nats.NatGateways {
			if n.State != ec2types.NatGatewayStateDeleted && n.State != ec2types.NatGatewayStateDeleting {
				add(region, "nat-gateway", aws.ToString(n.NatGatewayId), ec2Tags(n.Tags))
			}
		}
		eips, err := ec.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{})
		fail("DescribeAddresses "+region, err)
		for _, a := range eips.Addresses {
			add(region, "elastic-ip", aws.ToString(a.AllocationId), ec2Tags(a.Tags))
		}
		rts, err := ec.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{})
		fail("DescribeRouteTables "+region, err)
		for _, r := range rts.RouteTables {
			add(region, "route-table", aws.ToString(r.RouteTableId), ec2Tags(r.Tags))
		}
		sgs, err := ec.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
		fail("DescribeSecurityGroups "+region, err)
		for _, g := range sgs.SecurityGroups {
			add(region, "security-group", aws.ToString(g.GroupId)+" "+aws.ToString(g.GroupName), ec2Tags(g.Tags))
		}
		ek := eks.NewFromConfig(config(t, endpoint, region))
		clusters, err := ek.ListClusters(ctx, &eks.ListClustersInput{})
		fail("ListClusters "+region, err)
		for _, c := range clusters.Clusters {
			add(region, "eks-cluster", c, nil)
		}
		cf := cloudformation.NewFromConfig(config(t, endpoint, region))
		stacks, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{})
		fail("DescribeStacks "+region, err)
		for _, s := range stacks.Stacks {
			if s.StackStatus != cfntypes.StackStatusDeleteComplete {
				add(region, "cfn-stack", aws.ToString(s.StackName), nil)
			}
		}
	}
	ic := iam.NewFromConfig(config(t, endpoint, "us-east-1"))
	roles, err := ic.ListRoles(ctx, &iam.ListRolesInput{})
	fail("ListRoles", err)
	for _, r := range roles.Roles {
		add("global", "iam-role", aws.ToString(r.RoleName), nil)
	}
	profiles, err := ic.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	fail("ListInstanceProfiles", err)
	for _, p := range profiles.InstanceProfiles {
		add("global", "iam-instance-profile", aws.ToString(p.InstanceProfileName), nil)
	}
	policies, err := ic.ListPolicies(ctx, &iam.ListPoliciesInput{Scope: "Local"})
	fail("ListPolicies", err)
	for _, p := range policies.Policies {
		add("global", "iam-policy", aws.ToString(p.PolicyName), nil)
	}
	oidc, err := ic.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	fail("ListOpenIDConnectProviders", err)
	for _, p := range oidc.OpenIDConnectProviderList {
		add("global", "iam-oidc-provider", aws.ToString(p.Arn), nil)
	}
	sort.Strings(out)
	return out
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// OwnedVPC creates a VPC in region tagged, by CAPA's ownership tag, as
// cluster's, and returns its id: a decoy when cluster is one the
// environment does not name.
func OwnedVPC(t testing.TB, endpoint, region, cluster string) string {
	t.Helper()
	out, err := ec2.NewFromConfig(config(t, endpoint, region)).CreateVpc(context.Background(), &ec2.CreateVpcInput{CidrBlock: aws.String("10.99.0.0/16"),
		TagSpecifications: tagSpec(ec2types.ResourceTypeVpc, map[string]string{"sigs.k8s.io/cluster-api-provider-aws/cluster/" + cluster: "owned"})})
	if err != nil {
		t.Fatalf("creating a VPC owned by %s: %v", cluster, err)
	}
	return aws.ToString(out.Vpc.VpcId)
}
