// Package awstest builds the AWS footprint of the aws environment in moto
// (or any endpoint) for tests: what CAPA, EKS, ACK and clusterawsadm would
// have created for the management cluster and two workload clusters, plus
// decoys that must never be reported or deleted.
package awstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kropsdev/krops/tools/testenv"
)

// Account is moto's default account.
const Account = "123456789012"

// BootstrapTOML is an aws environment matching the footprint.
const BootstrapTOML = `
[bootstrap]
default-environment = "aws"
[charts]
flux-operator = "0.61.0"
cert-manager = "1.21.2"
capi-operator = "0.29.0"
[providers.aws.teardown]
cfn-stack-name = "cluster-api-provider-aws-sigs-k8s-io"
global-iam-roles = ["krops-eu-north-1-workload-reader"]
global-iam-users = ["krops-reader"]
s3-bucket-pattern = "krops-{account_id}-{cluster_name}-data"
[environments.aws]
provider = "aws"
sync = "github"
sync-path = "mgmt/aws"
mgmt-cluster = "eu-north-1-management"
mgmt-ready-timeout = "40m"
infra-provider-namespace = "capa-system"
infra-provider-name = "aws"
provider-manifests = ["x.yaml"]
[environments.aws.teardown]
mgmt-eks-cluster-name = "default_eu-north-1-management-control-plane"
mgmt-iam-role-prefix = "eu-north-1-management"
[[environments.aws.teardown.aws-workloads]]
region = "eu-north-1"
cluster-name = "eu-north-1-workload"
eks-cluster-name = "default_eu-north-1-workload-control-plane"
rds-instance = "krops-eu-north-1-workload-db"
[[environments.aws.teardown.aws-workloads]]
region = "eu-west-1"
cluster-name = "eu-west-1-workload"
eks-cluster-name = "default_eu-west-1-workload-control-plane"
rds-instance = "krops-eu-west-1-workload-db"
`

// ProviderConfig is BootstrapTOML's aws environment as the host sends it
// with Configure (config.ProviderJSON), so provider tests see exactly what
// krops binaries send. awsLines are added to [environments.aws].
//
// load is the host's own reading of the file (kit/config's Load, then
// ProviderJSON for "aws"), passed in so the harness does not depend on the
// host's packages.
func ProviderConfig(tb testing.TB, load func(path string) ([]byte, error), awsLines ...string) []byte {
	tb.Helper()
	toml := strings.Replace(BootstrapTOML, "provider = \"aws\"\n", "provider = \"aws\"\n"+strings.Join(awsLines, "\n")+"\n", 1)
	path := filepath.Join(tb.TempDir(), "bootstrap.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		tb.Fatal(err)
	}
	raw, err := load(path)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// Cluster is one cluster of the footprint.
type Cluster struct {
	Name, Region, EKS, RDS string
}

// Clusters are the environment's clusters.
var Clusters = []Cluster{
	{"eu-north-1-management", "eu-north-1", "default_eu-north-1-management-control-plane", ""},
	{"eu-north-1-workload", "eu-north-1", "default_eu-north-1-workload-control-plane", "krops-eu-north-1-workload-db"},
	{"eu-west-1-workload", "eu-west-1", "default_eu-west-1-workload-control-plane", "krops-eu-west-1-workload-db"},
}

// Footprint records what was created: "kind id" entries.
type Footprint struct {
	Owned []string
	// Decoys must never be deleted; Suspects, a subset of them, look like
	// ours by name and must be reported as suspects, never as ours.
	Decoys   []string
	Suspects []string
}

func (f *Footprint) own(kind, id string)   { f.Owned = append(f.Owned, kind+" "+id) }
func (f *Footprint) decoy(kind, id string) { f.Decoys = append(f.Decoys, kind+" "+id) }
func (f *Footprint) suspect(kind, id string) {
	f.decoy(kind, id)
	f.Suspects = append(f.Suspects, kind+" "+id)
}

// Sorted returns the owned set sorted.
func (f *Footprint) Sorted() []string {
	out := append([]string(nil), f.Owned...)
	sort.Strings(out)
	return out
}

// Options size the footprint.
type Options struct {
	// ObjectVersions per bucket (versions and delete markers).
	ObjectVersions int
	// BigBucketVersions, when set, replaces ObjectVersions for the
	// management cluster's bucket (to cross the 1000-key batch size once).
	BigBucketVersions int
	// ExtraPerVPC adds that many subnets and security groups to each
	// cluster's VPC (to size benchmarks).
	ExtraPerVPC int
	// StackIAM puts IAM into the bootstrap stack (a role, the managed
	// policy attached to it, its instance profile), as clusterawsadm's
	// stack holds, plus a role of the same naming outside the stack.
	StackIAM bool
}

func config(t testing.TB, endpoint, region string) aws.Config {
	t.Helper()
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(region), awsconfig.WithBaseEndpoint(endpoint),
		awsconfig.WithRetryMaxAttempts(1),
		// moto takes any credentials; static ones keep the machine's own
		// (or an instance role) out of the tests.
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("testing", "testing", "")))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// must panics on an error; Build turns the panic into t.Fatal, so each
// call stays one line.
func must[T any](v T, err error) T {
	if err != nil {
		panic(footprintError{err})
	}
	return v
}

type footprintError struct{ err error }

func tagSpec(rt ec2types.ResourceType, tags map[string]string) []ec2types.TagSpecification {
	var ts []ec2types.Tag
	for k, v := range tags {
		ts = append(ts, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return []ec2types.TagSpecification{{ResourceType: rt, Tags: ts}}
}

// Build creates the footprint through endpoint, an empty moto server.
//
// moto's HTTP server now and then drops a connection in the middle of a
// response. The fixture calls are not retried (a retried create could make a
// resource the footprint does not record), so on a dropped connection Build
// resets moto and starts over, at most three times in all.
func Build(t testing.TB, endpoint string, o Options) *Footprint {
	t.Helper()
	for attempt := 1; ; attempt++ {
		fp, err := build(t, endpoint, o)
		if err == nil {
			return fp
		}
		if attempt == 3 || !droppedConnection(err) {
			t.Fatalf("building the AWS footprint: %v", err)
		}
		t.Logf("building the AWS footprint: %v; resetting moto and starting over", err)
		if err := testenv.ResetMoto(context.Background(), endpoint); err != nil {
			t.Fatal(err)
		}
	}
}

func droppedConnection(err error) bool {
	msg := err.Error()
	for _, s := range []string{"use of closed network connection", "connection reset by peer", "unexpected EOF", ": EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func build(t testing.TB, endpoint string, o Options) (fp *Footprint, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(footprintError)
			if !ok {
				panic(r)
			}
			fp, err = nil, fe.err
		}
	}()
	ctx := context.Background()
	f := &Footprint{}
	for _, c := range Clusters {
		cfg := config(t, endpoint, c.Region)
		f.network(t, ctx, ec2.NewFromConfig(cfg), c, o.ExtraPerVPC)
		f.eks(t, ctx, eks.NewFromConfig(cfg), ec2.NewFromConfig(cfg), c)
		if c.RDS != "" {
			must(rds.NewFromConfig(cfg).CreateDBInstance(ctx, &rds.CreateDBInstanceInput{
				DBInstanceIdentifier: aws.String(c.RDS), DBInstanceClass: aws.String("db.t3.micro"), Engine: aws.String("postgres"),
				MasterUsername: aws.String("krops"), MasterUserPassword: aws.String("not-a-real-password-1"), AllocatedStorage: aws.Int32(20),
			}))
			f.own("rds-instance", c.RDS)
		}
		bucket := fmt.Sprintf("krops-%s-%s-data", Account, c.Name)
		versions := o.ObjectVersions
		if o.BigBucketVersions > 0 && c.Name == Clusters[0].Name {
			versions = o.BigBucketVersions
		}
		f.bucket(t, ctx, s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), c.Region, bucket, versions)
		f.own("s3-bucket", bucket)
	}
	north := config(t, endpoint, "eu-north-1")
	// Decoys in the same regions: no owner tag, other names.
	ec := ec2.NewFromConfig(north)
	v := must(ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.200.0.0/16")}))
	f.decoy("vpc", aws.ToString(v.Vpc.VpcId))
	v = must(ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.201.0.0/16"),
		TagSpecifications: tagSpec(ec2types.ResourceTypeVpc, map[string]string{"sigs.k8s.io/cluster-api-provider-aws/cluster/someone-else": "owned"})}))
	f.decoy("vpc", aws.ToString(v.Vpc.VpcId))
	e := must(ec.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc}))
	f.decoy("elastic-ip", aws.ToString(e.AllocationId))
	s3c := s3.NewFromConfig(north, func(o *s3.Options) { o.UsePathStyle = true })
	f.bucket(t, ctx, s3c, "eu-north-1", "someone-elses-bucket", 1)
	f.decoy("s3-bucket", "someone-elses-bucket")

	ic := iam.NewFromConfig(north)
	policyDoc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}]}`
	shared := f.iam(ctx, ic, policyDoc)
	must(ic.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("krops-reader")}))
	must(ic.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String("krops-reader")}))
	must(ic.CreateLoginProfile(ctx, &iam.CreateLoginProfileInput{UserName: aws.String("krops-reader"), Password: aws.String("Not-a-real-password-1")}))
	must(ic.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String("krops-reader"), PolicyName: aws.String("read"), PolicyDocument: aws.String(policyDoc)}))
	must(ic.AttachUserPolicy(ctx, &iam.AttachUserPolicyInput{UserName: aws.String("krops-reader"), PolicyArn: aws.String(shared)}))
	f.own("iam-user", "krops-reader")
	must(ic.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("someone")}))
	f.decoy("iam-user", "someone")

	// With StackIAM the bootstrap stack holds IAM the way clusterawsadm's
	// does: a role with a managed policy of the same stack attached, in an
	// instance profile. Its members are ours by membership; moto's stack
	// deletion can leave such a role (it deletes the role before
	// detaching), so the sweep deletes what the stack left. A role of the
	// same CAPA naming outside the stack is someone else's.
	tmpl := `{"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "krops-bootstrap-marker"}}}}`
	if o.StackIAM {
		tmpl = stackIAMTemplate
	}
	cf := cloudformation.NewFromConfig(north)
	must(cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("cluster-api-provider-aws-sigs-k8s-io"), TemplateBody: aws.String(tmpl)}))
	f.own("cloudformation-stack", "cluster-api-provider-aws-sigs-k8s-io")
	members := must(cf.ListStackResources(ctx, &cloudformation.ListStackResourcesInput{StackName: aws.String("cluster-api-provider-aws-sigs-k8s-io")}))
	for _, r := range members.StackResourceSummaries {
		kind := map[string]string{"AWS::IAM::Role": "iam-role", "AWS::IAM::ManagedPolicy": "iam-policy", "AWS::IAM::InstanceProfile": "iam-instance-profile"}[aws.ToString(r.ResourceType)]
		if kind != "" {
			f.own(kind, aws.ToString(r.PhysicalResourceId))
		}
	}
	if o.StackIAM {
		must(ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("nodes.cluster-api-provider-aws.sigs.k8s.io"),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}))
		f.decoy("iam-role", "nodes.cluster-api-provider-aws.sigs.k8s.io")
	}
	return f, nil
}

func (f *Footprint) network(t testing.TB, ctx context.Context, ec *ec2.Client, c Cluster, extra int) {
	owner := map[string]string{"sigs.k8s.io/cluster-api-provider-aws/cluster/" + c.Name: "owned", "krops.io/run-id": "aws-run-1"}
	cidr := map[string]string{"eu-north-1-management": "10.0", "eu-north-1-workload": "10.1", "eu-west-1-workload": "10.2"}[c.Name]
	vpc := must(ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(cidr + ".0.0/16"), TagSpecifications: tagSpec(ec2types.ResourceTypeVpc, owner)}))
	vpcID := aws.ToString(vpc.Vpc.VpcId)
	f.own("vpc", vpcID)
	var subnets []string
	for i, az := range []string{"a", "b"} {
		s := must(ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: aws.String(vpcID), CidrBlock: aws.String(fmt.Sprintf("%s.%d.0/24", cidr, i)),
			AvailabilityZone: aws.String(c.Region + az), TagSpecifications: tagSpec(ec2types.ResourceTypeSubnet, owner)}))
		subnets = append(subnets, aws.ToString(s.Subnet.SubnetId))
		f.own("subnet", aws.ToString(s.Subnet.SubnetId))
	}
	igw := must(ec.CreateInternetGateway(ctx, &ec2.CreateInternetGatewayInput{TagSpecifications: tagSpec(ec2types.ResourceTypeInternetGateway, owner)}))
	igwID := aws.ToString(igw.InternetGateway.InternetGatewayId)
	must(ec.AttachInternetGateway(ctx, &ec2.AttachInternetGatewayInput{InternetGatewayId: aws.String(igwID), VpcId: aws.String(vpcID)}))
	f.own("internet-gateway", igwID)
	rt := must(ec.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: aws.String(vpcID), TagSpecifications: tagSpec(ec2types.ResourceTypeRouteTable, owner)}))
	rtID := aws.ToString(rt.RouteTable.RouteTableId)
	must(ec.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: aws.String(rtID), SubnetId: aws.String(subnets[0])}))
	f.own("route-table", rtID)
	sg := must(ec.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(c.Name + "-node"), Description: aws.String("nodes"),
		VpcId: aws.String(vpcID), TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroup, owner)}))
	sgID := aws.ToString(sg.GroupId)
	must(ec.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(sgID),
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(443), ToPort: aws.Int32(443), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("10.0.0.0/8")}}}}}))
	f.own("security-group", sgID)
	for i := range extra {
		s := must(ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: aws.String(vpcID), CidrBlock: aws.String(fmt.Sprintf("%s.%d.0/24", cidr, 10+i)),
			TagSpecifications: tagSpec(ec2types.ResourceTypeSubnet, owner)}))
		f.own("subnet", aws.ToString(s.Subnet.SubnetId))
		g := must(ec.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(fmt.Sprintf("%s-extra-%d", c.Name, i)),
			Description: aws.String("extra"), VpcId: aws.String(vpcID)}))
		f.own("security-group", aws.ToString(g.GroupId))
	}
	for i := range 2 {
		eip := must(ec.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc, TagSpecifications: tagSpec(ec2types.ResourceTypeElasticIp, owner)}))
		f.own("elastic-ip", aws.ToString(eip.AllocationId))
		if i == 0 {
			nat := must(ec.CreateNatGateway(ctx, &ec2.CreateNatGatewayInput{SubnetId: aws.String(subnets[0]), AllocationId: eip.AllocationId,
				TagSpecifications: tagSpec(ec2types.ResourceTypeNatgateway, owner)}))
			f.own("nat-gateway", aws.ToString(nat.NatGateway.NatGatewayId))
		}
	}
}

func (f *Footprint) eks(t testing.TB, ctx context.Context, ek *eks.Client, ec *ec2.Client, c Cluster) {
	subnets := must(ec.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:sigs.k8s.io/cluster-api-provider-aws/cluster/" + c.Name), Values: []string{"owned"}}}}))
	var ids []string
	for _, s := range subnets.Subnets {
		ids = append(ids, aws.ToString(s.SubnetId))
	}
	role := "arn:aws:iam::" + Account + ":role/" + c.Name + "-control-plane"
	must(ek.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(c.EKS), RoleArn: aws.String(role),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: ids}, Tags: map[string]string{"krops.io/run-id": "aws-run-1"}}))
	f.own("eks-cluster", c.EKS)
	for _, ng := range []string{"arm", "gpu"} {
		must(ek.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String(c.EKS), NodegroupName: aws.String(ng),
			NodeRole: aws.String(role), Subnets: ids}))
		f.own("eks-nodegroup", c.EKS+"/"+ng)
	}
	if c.Region == "eu-west-1" {
		must(ek.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("someone-elses-eks"), RoleArn: aws.String(role),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: ids}}))
		f.decoy("eks-cluster", "someone-elses-eks")
	}
}

func (f *Footprint) bucket(t testing.TB, ctx context.Context, c *s3.Client, region, name string, versions int) {
	must(c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}}))
	must(c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(name),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}))
	for i := range versions {
		key := fmt.Sprintf("data/%d", i%3)
		if i%4 == 3 {
			must(c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String(key)}))
			continue
		}
		must(c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String(key), Body: strings.NewReader(fmt.Sprint(i))}))
	}
}

// iam builds the IAM side as CAPA (EKSEnableIAM), ACK and people make it,
// and returns the ARN of an untagged policy shared with other teams.
//
// Ours: each EKS control-plane role, by CAPA's tag or (eu-west-1-workload,
// untagged) by its exact CAPA name; each node-group role by CAPA's tag,
// whatever its name, with its instance profile, an inline policy and a
// tagged customer-managed policy; the ACK reader role listed in
// global-iam-roles.
//
// Not ours: roles and a policy whose names begin like a target's but carry
// no evidence, or whose tag names another cluster (suspects); a role of a
// cluster of another environment; an unrelated role and profile; the shared
// policy (detached from our roles, never deleted).
func (f *Footprint) iam(ctx context.Context, ic *iam.Client, policyDoc string) string {
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	role := func(name string, tags map[string]string) {
		var ts []iamtypes.Tag
		for k, v := range tags {
			ts = append(ts, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		must(ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust), Tags: ts}))
	}
	policy := func(name string, tags map[string]string) string {
		var ts []iamtypes.Tag
		for k, v := range tags {
			ts = append(ts, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		return aws.ToString(must(ic.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String(name), PolicyDocument: aws.String(policyDoc), Tags: ts})).Policy.Arn)
	}
	owned := func(cluster string) map[string]string {
		return map[string]string{"kubernetes.io/cluster/" + cluster: "owned", "krops.io/run-id": "aws-run-1"}
	}
	shared := policy("krops-nodes", nil)
	for i, c := range Clusters {
		cp := c.Name + "-iam-service-role"
		if c.Name == "eu-west-1-workload" {
			role(cp, nil) // evidence: the exact name CAPA derives
		} else {
			role(cp, owned(c.Name))
		}
		f.own("iam-role", cp)
		// CAPA shortens long node-group role names with a hash; the tag
		// is what ties them to the cluster.
		ng := c.Name + "-arm-nodegroup-iam-service-role"
		if i == 2 {
			ng = "capa-ng-7f3e2a9c"
		}
		role(ng, owned(c.Name))
		f.own("iam-role", ng)
		must(ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(ng)}))
		must(ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(ng), RoleName: aws.String(ng)}))
		f.own("iam-instance-profile", ng)
		must(ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(ng), PolicyName: aws.String("inline"), PolicyDocument: aws.String(policyDoc)}))
		must(ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(ng), PolicyArn: aws.String(shared)}))
		extra := policy(c.Name+"-nodes-extra", owned(c.Name))
		must(ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(ng), PolicyArn: aws.String(extra)}))
		f.own("iam-policy", extra)
	}
	role("krops-eu-north-1-workload-reader", nil)
	f.own("iam-role", "krops-eu-north-1-workload-reader")

	for _, name := range []string{"eu-north-1-management-ci", "eu-north-1-management-nodes"} {
		role(name, map[string]string{"team": "platform"})
		f.suspect("iam-role", name)
	}
	role("eu-north-1-workload-blue-iam-service-role", owned("eu-north-1-workload-blue"))
	f.suspect("iam-role", "eu-north-1-workload-blue-iam-service-role")
	f.suspect("iam-policy", policy("eu-north-1-management-audit", nil))
	role("staging-eu-north-1-workload-iam-service-role", owned("staging-eu-north-1-workload"))
	f.decoy("iam-role", "staging-eu-north-1-workload-iam-service-role")
	role("unrelated-role", nil)
	must(ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("unrelated-role"), PolicyArn: aws.String(shared)}))
	must(ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("unrelated-profile")}))
	must(ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("unrelated-profile"), RoleName: aws.String("unrelated-role")}))
	f.decoy("iam-role", "unrelated-role")
	f.decoy("iam-instance-profile", "unrelated-profile")
	f.decoy("iam-policy", shared)
	return shared
}

// stackIAMTemplate is the bootstrap stack with IAM members (Options.StackIAM).
const stackIAMTemplate = `{"Resources": {
  "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "krops-bootstrap-marker"}},
  "ControllersPolicy": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {"ManagedPolicyName": "controllers.cluster-api-provider-aws.sigs.k8s.io",
    "PolicyDocument": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"}]}}},
  "ControllersRole": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "controllers.cluster-api-provider-aws.sigs.k8s.io",
    "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
    "ManagedPolicyArns": [{"Ref": "ControllersPolicy"}]}},
  "ControllersProfile": {"Type": "AWS::IAM::InstanceProfile", "Properties": {"InstanceProfileName": "controllers.cluster-api-provider-aws.sigs.k8s.io",
    "Roles": [{"Ref": "ControllersRole"}]}}}}`
