package helmrelease_test

import (
	"context"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/kropsdev/krops/tools/kit/helmrelease"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// An OCI chart is tagged as its publisher pushed it: cert-manager's mirror
// holds cert-manager:v1.21.2 while bootstrap.toml pins 1.21.2 (the real-engine
// lane found the pivot's install failing with "not found"). The pin finds
// the chart either way, and a rerun at the same pin changes nothing.
func TestAnOCIPinFindsItsTagWithOrWithoutV(t *testing.T) {
	reg := testenv.Registry(t)
	c := testenv.APIServer(t, testenv.ClusterOptions{Name: "helmrelease"})
	cm := &common.File{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}-{{ .Chart.Version }}', namespace: '{{ .Release.Namespace }}'}\n")}
	for _, tagged := range []string{"v1.2.3", "0.4.0"} {
		repo := seedtest.PushChart(t, reg.Host, &chart.Chart{
			Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "tagged-" + tagged[:1], Version: tagged},
			Templates: []*common.File{cm}})
		for _, pin := range []string{"1.2.3", "v1.2.3", "0.4.0", "v0.4.0"} {
			if !helmrelease.SameVersion(pin, tagged) {
				continue
			}
			ch := helmrelease.Chart{Name: "tagged-" + tagged[:1], Version: pin, Repository: repo}
			rel := helmrelease.Release{Cluster: kubecfg.Ref{Path: c.Kubeconfig, Context: c.Context}, Namespace: "charts", Name: "r-" + tagged[:1]}
			changed, err := helmrelease.Ensure(context.Background(), ch, rel)
			if err != nil {
				t.Fatalf("pin %s, chart tagged %s: %v", pin, tagged, err)
			}
			if again, err := helmrelease.Ensure(context.Background(), ch, rel); err != nil || again {
				t.Errorf("pin %s again: changed %v, %v; want nothing changed", pin, again, err)
			}
			t.Logf("pin %s, chart tagged %s: installed (changed %v)", pin, tagged, changed)
		}
	}
}
