package awsprovider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Resource kinds.
const (
	KindEKSCluster         = "eks-cluster"
	KindEKSNodegroup       = "eks-nodegroup"
	KindRDSInstance        = "rds-instance"
	KindVPC                = "vpc"
	KindNATGateway         = "nat-gateway"
	KindElasticIP          = "elastic-ip"
	KindSubnet             = "subnet"
	KindInternetGateway    = "internet-gateway"
	KindRouteTable         = "route-table"
	KindSecurityGroup      = "security-group"
	KindS3Bucket           = "s3-bucket"
	KindIAMRole            = "iam-role"
	KindIAMInstanceProfile = "iam-instance-profile"
	KindIAMPolicy          = "iam-policy"
	KindIAMUser            = "iam-user"
	KindCFNStack           = "cloudformation-stack"
)

// Global is the region of account-wide resources (IAM, S3 names).
const Global = "global"

// emitter serialises events from concurrent scanners and stops them all
// once the host has gone.
type emitter struct {
	mu     sync.Mutex
	emit   func(sdk.DiscoverEvent) error
	err    error
	cancel context.CancelFunc
}

func (e *emitter) send(ev sdk.DiscoverEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	if err := e.emit(ev); err != nil {
		e.err = err
		e.cancel()
	}
}

func (e *emitter) resource(r sdk.Resource) { e.send(sdk.DiscoverEvent{Resource: &r}) }

func (e *emitter) suspect(r sdk.Resource) { e.send(sdk.DiscoverEvent{Suspect: &r}) }

func (e *emitter) failed(kind, region string, err error) {
	e.send(sdk.DiscoverEvent{Error: &sdk.QueryError{Kind: kind, Region: region, Message: err.Error()}})
}

// Discover lists everything krops owns for the configured targets: per
// region concurrently, and the account-wide resources alongside. A query
// that fails is reported for its kind and region; it never reads as empty.
func (p *Provider) Discover(ctx context.Context, emit func(sdk.DiscoverEvent) error) error {
	account, err := p.checkedAccount(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &emitter{emit: emit, cancel: cancel}
	e.send(sdk.DiscoverEvent{Scope: &sdk.Scope{Account: account, Regions: p.s.regions()}})
	p.scan(ctx, account, e)
	if e.err != nil {
		return e.err
	}
	return ctx.Err()
}

// scan runs every scanner concurrently. The number of scanners is bounded
// by the configuration (three per cluster plus three account-wide), so no
// further limit is needed; the SDK's adaptive retryer slows down if AWS
// throttles.
func (p *Provider) scan(ctx context.Context, account string, e *emitter) {
	var fns []func()
	for _, region := range p.s.regions() {
		for _, t := range p.s.targetsIn(region) {
			fns = append(fns, func() { p.scanEKS(ctx, t, e) }, func() { p.scanRDS(ctx, t, e) }, func() { p.scanNetwork(ctx, t, e) })
		}
	}
	fns = append(fns, func() { p.scanBuckets(ctx, account, e) }, func() { p.scanIAM(ctx, e) }, func() { p.scanStack(ctx, e) })
	p.parallel(fns...)
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func evidenceName(key, value string) string {
	return fmt.Sprintf("exact name %s from bootstrap.toml %s", value, key)
}

func (p *Provider) scanEKS(ctx context.Context, t Target, e *emitter) {
	if t.EKSCluster == "" {
		return
	}
	c, err := p.c.eks(ctx, t.Region)
	if err != nil {
		e.failed(KindEKSCluster, t.Region, err)
		return
	}
	out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(t.EKSCluster)})
	if apiCode(err) == "ResourceNotFoundException" {
		return
	}
	if err != nil {
		e.failed(KindEKSCluster, t.Region, err)
		return
	}
	cluster := sdk.Resource{Kind: KindEKSCluster, ID: t.EKSCluster, Region: t.Region, Cluster: t.Cluster,
		CreatedAt: out.Cluster.CreatedAt, Tags: out.Cluster.Tags, Evidence: []string{evidenceName(t.EKSKey, t.EKSCluster)}}
	pages := eks.NewListNodegroupsPaginator(c, &eks.ListNodegroupsInput{ClusterName: aws.String(t.EKSCluster)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			e.failed(KindEKSNodegroup, t.Region, err)
			break
		}
		for _, ng := range page.Nodegroups {
			d, err := c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(t.EKSCluster), NodegroupName: aws.String(ng)})
			if apiCode(err) == "ResourceNotFoundException" {
				continue
			}
			if err != nil {
				e.failed(KindEKSNodegroup, t.Region, err)
				continue
			}
			id := t.EKSCluster + "/" + ng
			e.resource(sdk.Resource{Kind: KindEKSNodegroup, ID: id, Region: t.Region, Cluster: t.Cluster,
				CreatedAt: d.Nodegroup.CreatedAt, Tags: d.Nodegroup.Tags, Evidence: []string{"nodegroup of EKS cluster " + t.EKSCluster}})
			cluster.DependsOn = append(cluster.DependsOn, id)
		}
	}
	e.resource(cluster)
}

func (p *Provider) scanRDS(ctx context.Context, t Target, e *emitter) {
	if t.RDSInstance == "" {
		return
	}
	c, err := p.c.rds(ctx, t.Region)
	if err != nil {
		e.failed(KindRDSInstance, t.Region, err)
		return
	}
	out, err := c.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(t.RDSInstance)})
	if apiCode(err) == "DBInstanceNotFound" || apiCode(err) == "DBInstanceNotFoundFault" {
		return
	}
	if err != nil {
		e.failed(KindRDSInstance, t.Region, err)
		return
	}
	for _, db := range out.DBInstances {
		tags := map[string]string{}
		for _, tg := range db.TagList {
			tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		e.resource(sdk.Resource{Kind: KindRDSInstance, ID: aws.ToString(db.DBInstanceIdentifier), Region: t.Region, Cluster: t.Cluster,
			CreatedAt: db.InstanceCreateTime, Tags: tags, Evidence: []string{evidenceName(t.RDSKey, t.RDSInstance)}})
	}
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// scanNetwork lists the cluster's CAPA-owned VPCs and everything in them,
// and the cluster's Elastic IPs.
func (p *Provider) scanNetwork(ctx context.Context, t Target, e *emitter) {
	c, err := p.c.ec2(ctx, t.Region)
	if err != nil {
		e.failed(KindVPC, t.Region, err)
		return
	}
	owner := filter("tag:"+OwnerTag(t.Cluster), "owned")
	ownerEvidence := "tag " + OwnerTag(t.Cluster) + "=owned"
	var vpcs []ec2types.Vpc
	vp := ec2.NewDescribeVpcsPaginator(c, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{owner}})
	for vp.HasMorePages() {
		page, err := vp.NextPage(ctx)
		if err != nil {
			e.failed(KindVPC, t.Region, err)
			return
		}
		vpcs = append(vpcs, page.Vpcs...)
	}
	// NAT gateways hold Elastic IPs; the EIPs must wait for them.
	eipUsers := map[string][]string{}
	for _, vpc := range vpcs {
		p.scanVPC(ctx, c, t, vpc, ownerEvidence, eipUsers, e)
	}
	// DescribeAddresses has no pagination.
	out, err := c.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []ec2types.Filter{owner, filter("domain", "vpc")}})
	if err != nil {
		e.failed(KindElasticIP, t.Region, err)
		return
	}
	for _, a := range out.Addresses {
		id := aws.ToString(a.AllocationId)
		e.resource(sdk.Resource{Kind: KindElasticIP, ID: id, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(a.Tags),
			Evidence: []string{ownerEvidence}, DependsOn: eipUsers[id]})
	}
}

// vpcContents is what one VPC holds, listed concurrently.
type vpcContents struct {
	nats    []ec2types.NatGateway
	subnets []ec2types.Subnet
	igws    []ec2types.InternetGateway
	rts     []ec2types.RouteTable
	sgs     []ec2types.SecurityGroup
	failed  map[string]error
}

func (p *Provider) listVPC(ctx context.Context, c *ec2.Client, vpcID string) vpcContents {
	inVPC := filter("vpc-id", vpcID)
	var v vpcContents
	var mu sync.Mutex
	v.failed = map[string]error{}
	fail := func(kind string, err error) { mu.Lock(); v.failed[kind] = err; mu.Unlock() }
	p.parallel(
		func() {
			pages := ec2.NewDescribeNatGatewaysPaginator(c, &ec2.DescribeNatGatewaysInput{Filter: []ec2types.Filter{inVPC, filter("state", "pending", "available", "deleting")}})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					fail(KindNATGateway, err)
					return
				}
				v.nats = append(v.nats, page.NatGateways...)
			}
		},
		func() {
			pages := ec2.NewDescribeSubnetsPaginator(c, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{inVPC}})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					fail(KindSubnet, err)
					return
				}
				v.subnets = append(v.subnets, page.Subnets...)
			}
		},
		func() {
			pages := ec2.NewDescribeInternetGatewaysPaginator(c, &ec2.DescribeInternetGatewaysInput{Filters: []ec2types.Filter{filter("attachment.vpc-id", vpcID)}})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					fail(KindInternetGateway, err)
					return
				}
				v.igws = append(v.igws, page.InternetGateways...)
			}
		},
		func() {
			pages := ec2.NewDescribeRouteTablesPaginator(c, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{inVPC}})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					fail(KindRouteTable, err)
					return
				}
				v.rts = append(v.rts, page.RouteTables...)
			}
		},
		func() {
			pages := ec2.NewDescribeSecurityGroupsPaginator(c, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{inVPC}})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					fail(KindSecurityGroup, err)
					return
				}
				v.sgs = append(v.sgs, page.SecurityGroups...)
			}
		},
	)
	return v
}

// scanVPC reports one VPC and its contents with their dependency edges:
// subnets wait for their NAT gateways, internet gateways for everything
// that may hold public addresses, the VPC for all of it.
func (p *Provider) scanVPC(ctx context.Context, c *ec2.Client, t Target, vpc ec2types.Vpc, ownerEvidence string, eipUsers map[string][]string, e *emitter) {
	vpcID := aws.ToString(vpc.VpcId)
	v := p.listVPC(ctx, c, vpcID)
	for kind, err := range v.failed {
		e.failed(kind, t.Region, err)
	}
	r := sdk.Resource{Kind: KindVPC, ID: vpcID, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(vpc.Tags), Evidence: []string{ownerEvidence}}
	in := []string{"in VPC " + vpcID}
	subnetNATs := map[string][]string{}
	for _, n := range v.nats {
		id := aws.ToString(n.NatGatewayId)
		e.resource(sdk.Resource{Kind: KindNATGateway, ID: id, Region: t.Region, Cluster: t.Cluster, CreatedAt: n.CreateTime, Tags: ec2Tags(n.Tags), Evidence: in})
		r.DependsOn = append(r.DependsOn, id)
		subnetNATs[aws.ToString(n.SubnetId)] = append(subnetNATs[aws.ToString(n.SubnetId)], id)
		for _, a := range n.NatGatewayAddresses {
			if a.AllocationId != nil {
				eipUsers[*a.AllocationId] = append(eipUsers[*a.AllocationId], id)
			}
		}
	}
	for _, s := range v.subnets {
		id := aws.ToString(s.SubnetId)
		e.resource(sdk.Resource{Kind: KindSubnet, ID: id, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(s.Tags), Evidence: in, DependsOn: subnetNATs[id]})
		r.DependsOn = append(r.DependsOn, id)
	}
	natsAndSubnets := append([]string(nil), r.DependsOn...)
	for _, g := range v.igws {
		id := aws.ToString(g.InternetGatewayId)
		e.resource(sdk.Resource{Kind: KindInternetGateway, ID: id, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(g.Tags),
			Evidence: []string{"attached to VPC " + vpcID}, DependsOn: natsAndSubnets})
		r.DependsOn = append(r.DependsOn, id)
	}
	for _, rt := range v.rts {
		if isMain(rt) {
			continue // goes with the VPC
		}
		id := aws.ToString(rt.RouteTableId)
		e.resource(sdk.Resource{Kind: KindRouteTable, ID: id, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(rt.Tags), Evidence: in})
		r.DependsOn = append(r.DependsOn, id)
	}
	for _, g := range v.sgs {
		if aws.ToString(g.GroupName) == "default" {
			continue // goes with the VPC
		}
		id := aws.ToString(g.GroupId)
		e.resource(sdk.Resource{Kind: KindSecurityGroup, ID: id, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(g.Tags), Evidence: in})
		r.DependsOn = append(r.DependsOn, id)
	}
	e.resource(r)
}

// parallel runs fns concurrently, or one after another when the provider
// is in sequential mode (the benchmarks' baseline).
func (p *Provider) parallel(fns ...func()) {
	if p.o.Sequential {
		for _, f := range fns {
			f()
		}
		return
	}
	var wg sync.WaitGroup
	for _, f := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}

func isMain(rt ec2types.RouteTable) bool {
	for _, a := range rt.Associations {
		if aws.ToBool(a.Main) {
			return true
		}
	}
	return false
}

// scanBuckets matches the account's buckets against s3-bucket-pattern.
func (p *Provider) scanBuckets(ctx context.Context, account string, e *emitter) {
	if p.s.bucketPattern == "" {
		return
	}
	want := map[string]Target{}
	for _, t := range p.s.targets {
		want[p.s.bucketName(account, t.Cluster)] = t
	}
	c, err := p.c.s3(ctx, p.s.mgmt().Region)
	if err != nil {
		e.failed(KindS3Bucket, Global, err)
		return
	}
	pages := s3.NewListBucketsPaginator(c, &s3.ListBucketsInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			e.failed(KindS3Bucket, Global, err)
			return
		}
		for _, b := range page.Buckets {
			t, ok := want[aws.ToString(b.Name)]
			if !ok {
				continue
			}
			e.resource(sdk.Resource{Kind: KindS3Bucket, ID: aws.ToString(b.Name), Region: t.Region, Cluster: t.Cluster,
				CreatedAt: b.CreationDate, Evidence: []string{"exact name from bootstrap.toml [teardown] s3-bucket-pattern " + p.s.bucketPattern + " for cluster " + t.Cluster}})
		}
	}
}

// scanStack looks up the CAPA bootstrap CloudFormation stack in the
// management region, where `clusterawsadm bootstrap iam` creates it.
func (p *Provider) scanStack(ctx context.Context, e *emitter) {
	if p.s.cfnStack == "" {
		return
	}
	region := p.s.mgmt().Region
	c, err := p.c.cfn(ctx, region)
	if err != nil {
		e.failed(KindCFNStack, region, err)
		return
	}
	out, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(p.s.cfnStack)})
	if apiCode(err) == "ValidationError" && strings.Contains(err.Error(), "does not exist") {
		return
	}
	if err != nil {
		e.failed(KindCFNStack, region, err)
		return
	}
	for _, st := range out.Stacks {
		if st.StackStatus == cfntypes.StackStatusDeleteComplete {
			continue
		}
		tags := map[string]string{}
		for _, tg := range st.Tags {
			tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		created := st.CreationTime
		if created != nil {
			c := created.UTC().Truncate(time.Second)
			created = &c
		}
		e.resource(sdk.Resource{Kind: KindCFNStack, ID: aws.ToString(st.StackName), Region: region, CreatedAt: created, Tags: tags,
			Evidence: []string{"exact name from bootstrap.toml [teardown] cfn-stack-name"}})
	}
}
