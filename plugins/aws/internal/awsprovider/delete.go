package awsprovider

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// notFoundCodes mean the resource is gone: a named lookup said so. EC2
// codes ending in .NotFound mean the same (isNotFound).
var notFoundCodes = map[string]bool{
	"InvalidVpcID.NotFound": true, "InvalidSubnetID.NotFound": true, "InvalidGroup.NotFound": true,
	"InvalidRouteTableID.NotFound": true, "InvalidInternetGatewayID.NotFound": true, "InvalidAllocationID.NotFound": true,
	"NatGatewayNotFound": true, "InvalidNatGatewayID.NotFound": true, "ResourceNotFoundException": true,
	"DBInstanceNotFound": true, "DBInstanceNotFoundFault": true, "NoSuchBucket": true, "NoSuchEntity": true,
}

// retryCodes mean "not yet": a dependency still exists or the resource is
// in a transitional state. The next pass tries again.
var retryCodes = map[string]bool{
	"DependencyViolation": true, "ResourceInUseException": true, "InvalidIPAddress.InUse": true,
	"DeleteConflict": true, "InvalidDBInstanceState": true, "InvalidDBInstanceStateFault": true,
	"BucketNotEmpty": true, "IncorrectState": true, "InvalidStateException": true, "OperationAbortedException": true,
}

// isNotFound says a named thing is not there: the resource, or what a
// sub-step of its deletion would have removed (an association, a rule, an
// attachment).
func isNotFound(err error) bool {
	code := apiCode(err)
	return notFoundCodes[code] || strings.HasSuffix(code, ".NotFound") || code == "Gateway.NotAttached" ||
		(code == "ValidationError" && strings.Contains(err.Error(), "does not exist"))
}

// classify turns a call's error into an outcome; done is the outcome of
// success. A NotFound is sweep.Gone: the goal is reached, whoever got there.
func classify(err error, done sweep.Result) sweep.Result {
	if err == nil {
		return done
	}
	code := apiCode(err)
	switch {
	case isNotFound(err):
		return gone
	case retryCodes[code]:
		return result(sweep.Blocked, code+": "+shortErr(err))
	}
	return result(sweep.Failed, shortErr(err))
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "api error "); i >= 0 {
		return s[i+len("api error "):]
	}
	return s
}

var (
	deleted = result(sweep.Deleted, "")
	gone    = result(sweep.Gone, "")
)

// regionOf maps a resource to the region its API lives in.
func (p *Provider) regionOf(r sdk.Resource) string {
	if r.Region == Global || r.Region == "" {
		return p.s.mgmt().Region
	}
	return r.Region
}

// deleteOne takes one step towards deleting r. started says an
// asynchronous deletion was already accepted, so only its end is awaited.
func (p *Provider) deleteOne(ctx context.Context, r sdk.Resource, started bool, tries int, progress func(string)) sweep.Result {
	region := p.regionOf(r)
	switch r.Kind {
	case KindEKSNodegroup, KindEKSCluster:
		c, err := p.c.eks(ctx, region)
		if err != nil {
			return result(sweep.Failed, err.Error())
		}
		return p.deleteEKS(ctx, c, r, started)
	case KindRDSInstance:
		c, err := p.c.rds(ctx, region)
		if err != nil {
			return result(sweep.Failed, err.Error())
		}
		return deleteRDS(ctx, c, r.ID, started)
	case KindNATGateway, KindElasticIP, KindSubnet, KindInternetGateway, KindRouteTable, KindSecurityGroup, KindVPC:
		c, err := p.c.ec2(ctx, region)
		if err != nil {
			return result(sweep.Failed, err.Error())
		}
		return deleteEC2(ctx, c, r, started, tries)
	case KindS3Bucket:
		c, err := p.c.s3(ctx, region)
		if err != nil {
			return result(sweep.Failed, err.Error())
		}
		return emptyAndDeleteBucket(ctx, c, r.ID, progress)
	case KindIAMRole, KindIAMInstanceProfile, KindIAMPolicy, KindIAMUser:
		c, err := p.c.iam(ctx, region)
		if err != nil {
			return result(sweep.Failed, err.Error())
		}
		switch r.Kind {
		case KindIAMRole:
			return deleteRole(ctx, c, r.ID)
		case KindIAMInstanceProfile:
			return deleteInstanceProfile(ctx, c, r.ID)
		case KindIAMPolicy:
			return deletePolicy(ctx, c, r.ID)
		}
		return deleteUser(ctx, c, r.ID)
	case KindCFNStack:
		c, err := p.c.cfn(ctx, region)
		if err != nil {
			return result(sweep.Failed, err.Error())
		}
		return deleteStack(ctx, c, r.ID, started)
	}
	return result(sweep.Failed, "the aws provider does not delete kind "+r.Kind)
}

func (p *Provider) deleteEKS(ctx context.Context, c *eks.Client, r sdk.Resource, started bool) sweep.Result {
	if r.Kind == KindEKSNodegroup {
		cluster, ng, _ := strings.Cut(r.ID, "/")
		if started {
			out, err := c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(ng)})
			if err != nil {
				return classify(err, deleted)
			}
			return result(sweep.InProgress, "nodegroup "+string(out.Nodegroup.Status))
		}
		_, err := c.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(ng)})
		return classify(err, result(sweep.InProgress, "deletion accepted"))
	}
	if started {
		out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(r.ID)})
		if err != nil {
			return classify(err, deleted)
		}
		return result(sweep.InProgress, "cluster "+string(out.Cluster.Status))
	}
	_, err := c.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(r.ID)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}

func deleteRDS(ctx context.Context, c *rds.Client, id string, started bool) sweep.Result {
	out, err := c.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(id)})
	if err != nil {
		return classify(err, deleted)
	}
	if len(out.DBInstances) == 0 {
		return gone
	}
	db := out.DBInstances[0]
	if started || aws.ToString(db.DBInstanceStatus) == "deleting" {
		return result(sweep.InProgress, "instance "+aws.ToString(db.DBInstanceStatus))
	}
	if aws.ToBool(db.DeletionProtection) {
		_, err := c.ModifyDBInstance(ctx, &rds.ModifyDBInstanceInput{DBInstanceIdentifier: aws.String(id), DeletionProtection: aws.Bool(false), ApplyImmediately: aws.Bool(true)})
		if a, ok := step(err); !ok {
			return a
		}
	}
	_, err = c.DeleteDBInstance(ctx, &rds.DeleteDBInstanceInput{DBInstanceIdentifier: aws.String(id), SkipFinalSnapshot: aws.Bool(true), DeleteAutomatedBackups: aws.Bool(true)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}

func deleteEC2(ctx context.Context, c *ec2.Client, r sdk.Resource, started bool, tries int) sweep.Result {
	id := aws.String(r.ID)
	var err error
	switch r.Kind {
	case KindNATGateway:
		if started {
			out, err := c.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{NatGatewayIds: []string{r.ID}})
			if err != nil {
				return classify(err, deleted)
			}
			if len(out.NatGateways) == 0 || out.NatGateways[0].State == ec2types.NatGatewayStateDeleted {
				return deleted
			}
			return result(sweep.InProgress, "NAT gateway "+string(out.NatGateways[0].State))
		}
		_, err = c.DeleteNatGateway(ctx, &ec2.DeleteNatGatewayInput{NatGatewayId: id})
		return classify(err, result(sweep.InProgress, "deletion accepted"))
	case KindElasticIP:
		_, err = c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: id})
	case KindSubnet:
		_, err = c.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: id})
	case KindInternetGateway:
		out, derr := c.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{InternetGatewayIds: []string{r.ID}})
		if derr != nil {
			return classify(derr, deleted)
		}
		for _, g := range out.InternetGateways {
			for _, a := range g.Attachments {
				_, err := c.DetachInternetGateway(ctx, &ec2.DetachInternetGatewayInput{InternetGatewayId: id, VpcId: a.VpcId})
				if a, ok := step(err); !ok {
					return a
				}
			}
		}
		_, err = c.DeleteInternetGateway(ctx, &ec2.DeleteInternetGatewayInput{InternetGatewayId: id})
	case KindRouteTable:
		out, derr := c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{r.ID}})
		if derr != nil {
			return classify(derr, deleted)
		}
		for _, rt := range out.RouteTables {
			for _, a := range rt.Associations {
				if aws.ToBool(a.Main) || a.RouteTableAssociationId == nil {
					continue
				}
				_, err := c.DisassociateRouteTable(ctx, &ec2.DisassociateRouteTableInput{AssociationId: a.RouteTableAssociationId})
				if a, ok := step(err); !ok {
					return a
				}
			}
		}
		_, err = c.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: id})
	case KindSecurityGroup:
		// Most groups delete at once, with their rules. A group still
		// referenced answers DependencyViolation; from the second try on,
		// its own rules are revoked first, which breaks reference cycles
		// between groups (each side drops its rule, then both delete).
		if tries <= 1 {
			_, err = c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: id})
			return classify(err, deleted)
		}
		out, derr := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{r.ID}})
		if derr != nil {
			return classify(derr, deleted)
		}
		for _, g := range out.SecurityGroups {
			if len(g.IpPermissions) > 0 {
				_, err := c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: id, IpPermissions: g.IpPermissions})
				if a, ok := step(err); !ok {
					return a
				}
			}
			if len(g.IpPermissionsEgress) > 0 {
				_, err := c.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: id, IpPermissions: g.IpPermissionsEgress})
				if a, ok := step(err); !ok {
					return a
				}
			}
		}
		_, err = c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: id})
	case KindVPC:
		_, err = c.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: id})
	}
	return classify(err, deleted)
}

// s3BatchSize is DeleteObjects' limit.
const s3BatchSize = 1000

// emptyAndDeleteBucket deletes every object version and delete marker in
// batches of 1000, then the bucket.
func emptyAndDeleteBucket(ctx context.Context, c *s3.Client, bucket string, progress func(string)) sweep.Result {
	removed := 0
	pages := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), MaxKeys: aws.Int32(s3BatchSize)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		var objs []s3types.ObjectIdentifier
		for _, v := range page.Versions {
			objs = append(objs, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range page.DeleteMarkers {
			objs = append(objs, s3types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		for start := 0; start < len(objs); start += s3BatchSize {
			batch := objs[start:min(start+s3BatchSize, len(objs))]
			out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &s3types.Delete{Objects: batch, Quiet: aws.Bool(true)}})
			if err != nil {
				return classify(err, deleted)
			}
			if len(out.Errors) > 0 {
				return result(sweep.Blocked, fmt.Sprintf("%d objects could not be deleted, first: %s", len(out.Errors), aws.ToString(out.Errors[0].Message)))
			}
			removed += len(batch)
			progress(fmt.Sprintf("%d object versions and delete markers deleted so far", removed))
		}
	}
	_, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	return classify(err, result(sweep.Deleted, fmt.Sprintf("emptied of %d object versions and delete markers", removed)))
}

func deleteStack(ctx context.Context, c *cloudformation.Client, stack string, started bool) sweep.Result {
	if started {
		out, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
		if err != nil {
			return classify(err, deleted)
		}
		if len(out.Stacks) == 0 {
			return deleted
		}
		switch st := out.Stacks[0].StackStatus; st {
		case cfntypes.StackStatusDeleteComplete:
			return deleted
		case cfntypes.StackStatusDeleteFailed:
			return result(sweep.Failed, "stack deletion failed: "+aws.ToString(out.Stacks[0].StackStatusReason))
		default:
			return result(sweep.InProgress, "stack "+string(st))
		}
	}
	_, err := c.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(stack)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}

func result(o sweep.Outcome, msg string) sweep.Result {
	return sweep.Result{Outcome: o, Message: msg}
}
