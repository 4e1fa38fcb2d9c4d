package awsprovider

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindS3Bucket is a bucket whose name is exactly what [teardown]
// s3-bucket-pattern gives for a target.
const KindS3Bucket = "s3-bucket"

func init() {
	register(kind{name: KindS3Bucket, scanAccount: (*Provider).scanBuckets, remove: removeS3Bucket})
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
				CreatedAt: b.CreationDate, Evidence: []string{"exact name from bootstrap.toml [providers.aws.teardown] s3-bucket-pattern " + p.s.bucketPattern + " for cluster " + t.Cluster}})
		}
	}
}

func removeS3Bucket(ctx context.Context, p *Provider, r sdk.Resource, a sweep.Attempt) sweep.Result {
	c, err := p.c.s3(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	return emptyAndDeleteBucket(ctx, c, r.ID, a.Progress)
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
