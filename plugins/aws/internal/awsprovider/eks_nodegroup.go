package awsprovider

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindEKSNodegroup is a nodegroup of an EKS cluster of ours, id
// "<cluster>/<nodegroup>". It is listed with its cluster (eks_cluster.go),
// which depends on it.
const KindEKSNodegroup = "eks-nodegroup"

func init() {
	register(kind{name: KindEKSNodegroup, remove: removeEKSNodegroup})
}

func removeEKSNodegroup(ctx context.Context, p *Provider, r sdk.Resource, a sweep.Attempt) sweep.Result {
	c, err := p.c.eks(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	cluster, ng, _ := strings.Cut(r.ID, "/")
	if a.Polling {
		out, err := c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(ng)})
		if err != nil {
			return classify(err, deleted)
		}
		return result(sweep.InProgress, "nodegroup "+string(out.Nodegroup.Status))
	}
	_, err = c.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(ng)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}
