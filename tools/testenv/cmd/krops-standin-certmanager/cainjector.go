package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// injectTargets are the kinds cainjector fills, with where their bundles
// live.
var injectTargets = []struct {
	gvr schema.GroupVersionResource
	// bundles lists the paths of caBundle fields in one object.
	bundles func(o *unstructured.Unstructured) [][]string
}{
	{schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, webhookBundles},
	{schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}, webhookBundles},
	{schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, func(o *unstructured.Unstructured) [][]string {
		if s, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); s != "Webhook" {
			return nil
		}
		return [][]string{{"spec", "conversion", "webhook", "clientConfig", "caBundle"}}
	}},
	{schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}, func(*unstructured.Unstructured) [][]string {
		return [][]string{{"spec", "caBundle"}}
	}},
}

func webhookBundles(o *unstructured.Unstructured) [][]string {
	hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
	var out [][]string
	for i := range hooks {
		out = append(out, []string{"webhooks", fmt.Sprint(i), "clientConfig", "caBundle"})
	}
	return out
}

// injectCAs is one pass of the cainjector.
func (c clients) injectCAs(ctx context.Context) error {
	for _, t := range injectTargets {
		list, err := c.dyn.Resource(t.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list %s: %w", t.gvr.Resource, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			ca, from, err := c.caFor(ctx, o.GetAnnotations())
			if from == "" {
				continue
			}
			if err != nil {
				c.logger.Printf("%s %s: %s: %v", t.gvr.Resource, o.GetName(), from, err)
				continue
			}
			if !setBundles(o, t.bundles(o), base64.StdEncoding.EncodeToString(ca)) {
				continue
			}
			if _, err := c.dyn.Resource(t.gvr).Update(ctx, o, metav1.UpdateOptions{}); err != nil {
				c.logger.Printf("%s %s: %v", t.gvr.Resource, o.GetName(), err)
				continue
			}
			c.logger.Printf("injected the CA of %s into %s %s", from, t.gvr.Resource, o.GetName())
		}
	}
	return nil
}

// caFor reads the CA an object's annotations ask for; from is empty when
// they ask for none.
func (c clients) caFor(ctx context.Context, ann map[string]string) (ca []byte, from string, err error) {
	ref, kind := ann["cert-manager.io/inject-ca-from-secret"], "secret"
	if ref == "" {
		ref, kind = ann["cert-manager.io/inject-ca-from"], "certificate"
	}
	if ref == "" {
		return nil, "", nil
	}
	from = kind + " " + ref
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return nil, from, fmt.Errorf("want <namespace>/<name>")
	}
	secretName := name
	if kind == "certificate" {
		cert, err := c.dyn.Resource(certificatesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, from, err
		}
		secretName, _, _ = unstructured.NestedString(cert.Object, "spec", "secretName")
	}
	s, err := c.core.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		return nil, from, err
	}
	if len(s.Data["ca.crt"]) == 0 {
		return nil, from, fmt.Errorf("secret %s/%s has no ca.crt yet", ns, secretName)
	}
	return s.Data["ca.crt"], from, nil
}

// setBundles writes bundle at every path and says whether any changed.
func setBundles(o *unstructured.Unstructured, paths [][]string, bundle string) bool {
	changed := false
	for _, p := range paths {
		if p[0] == "webhooks" {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			var i int
			fmt.Sscan(p[1], &i)
			h, _ := hooks[i].(map[string]any)
			if cur, _, _ := unstructured.NestedString(h, p[2:]...); cur != bundle {
				_ = unstructured.SetNestedField(h, bundle, p[2:]...)
				hooks[i] = h
				_ = unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
				changed = true
			}
			continue
		}
		if cur, _, _ := unstructured.NestedString(o.Object, p...); cur != bundle {
			_ = unstructured.SetNestedField(o.Object, bundle, p...)
			changed = true
		}
	}
	return changed
}
