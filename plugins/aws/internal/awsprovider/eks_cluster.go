package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindEKSCluster is an EKS cluster a target names exactly
// ([environments] mgmt-eks-cluster-name or a workload's).
const KindEKSCluster = "eks-cluster"

func init() {
	register(kind{name: KindEKSCluster, scanTarget: (*Provider).scanEKS, remove: removeEKSCluster})
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

// removeEKSCluster deletes the cluster (after its nodegroups, which it
// depends on) and polls until it is gone.
func removeEKSCluster(ctx context.Context, p *Provider, r sdk.Resource, a sweep.Attempt) sweep.Result {
	c, err := p.c.eks(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	if a.Polling {
		out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(r.ID)})
		if err != nil {
			return classify(err, deleted)
		}
		return result(sweep.InProgress, "cluster "+string(out.Cluster.Status))
	}
	_, err = c.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(r.ID)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}
