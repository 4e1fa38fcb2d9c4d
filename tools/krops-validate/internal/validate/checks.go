package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/crds"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/imageinventory"
)

// Problem is one failure: where, and what is wrong.
type Problem struct {
	Where   string
	Message string
}

// Result is one named check.
type Result struct {
	Check    string
	Problems []Problem
	// Notes are shown whether or not the check passed (for example kinds
	// that could not be schema-checked).
	Notes []string
}

// OK reports whether the check passed.
func (r Result) OK() bool { return len(r.Problems) == 0 }

// Input is everything the static checks read.
type Input struct {
	Root        string
	Config      *config.Config
	Objects     []Object
	BuildErrors map[string]error
	// RenderNotes name what could not be rendered (and so not checked).
	RenderNotes []string
	// Files maps repository-relative paths of YAML files under the trees
	// to their content.
	Files map[string][]byte
	// Images is airgap/images.txt's content, nil when the file is missing.
	Images []byte
}

// Trees are the directories validated: airgap holds the air-gapped
// cluster's Flux root and its FluxInstance.
var Trees = []string{"mgmt", "workload", "airgap"}

// Load renders the trees and reads the files the checks need.
func Load(root string, cfg *config.Config) (*Input, error) {
	in := &Input{Root: root, Config: cfg, BuildErrors: map[string]error{}, Files: map[string][]byte{}}
	roots, err := Roots(root, Trees...)
	if err != nil {
		return nil, err
	}
	for _, r := range roots {
		objs, err := Build(root, r)
		if err != nil {
			in.BuildErrors[r] = err
			continue
		}
		in.Objects = append(in.Objects, objs...)
		in.Objects = append(in.Objects, payloads(objs)...)
		rendered, errs, notes := resourceSets(objs)
		in.Objects = append(in.Objects, rendered...)
		in.RenderNotes = append(in.RenderNotes, notes...)
		for where, err := range errs {
			in.BuildErrors[where] = err
		}
	}
	for _, d := range Trees {
		base := filepath.Join(root, d)
		_ = filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				return nil
			}
			b, err := os.ReadFile(p)
			if err == nil {
				rel, _ := filepath.Rel(root, p)
				in.Files[rel] = b
			}
			return nil
		})
	}
	if b, err := os.ReadFile(filepath.Join(root, "airgap", "images.txt")); err == nil {
		in.Images = b
	}
	return in, nil
}

// payloads returns the objects embedded in ConfigMaps (ClusterResourceSet
// payloads such as a CNI or a FluxInstance), so they are schema-checked and
// their images inventoried like everything else.
func payloads(objs []Object) []Object {
	var out []Object
	for _, o := range objs {
		if _, k := o.Kind(); k != "ConfigMap" {
			continue
		}
		data, _ := o.Raw["data"].(map[string]any)
		for key, v := range data {
			text, _ := v.(string)
			for _, doc := range strings.Split(text, "\n---") {
				var m map[string]any
				if yaml.Unmarshal([]byte(doc), &m) != nil || m["apiVersion"] == nil || m["kind"] == nil {
					continue
				}
				out = append(out, Object{Root: fmt.Sprintf("%s, payload %s of ConfigMap %s", o.Root, key, o.Name()), Raw: m})
			}
		}
	}
	return out
}

// Static runs every check that needs no API server.
func Static(in *Input) []Result {
	return []Result{
		checkBuild(in), checkPaths(in), checkKustomizationPaths(in), checkKustomizationConventions(in), checkCharts(in), checkVersions(in), checkNaming(in), checkPlaceholders(in), checkSubstitution(in),
		checkDependsOn(in), checkSecrets(in), checkImages(in),
	}
}

func checkBuild(in *Input) Result {
	r := Result{Check: "every kustomization builds", Notes: in.RenderNotes}
	var dirs []string
	for d := range in.BuildErrors {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		r.Problems = append(r.Problems, Problem{d, in.BuildErrors[d].Error()})
	}
	return r
}

// checkPaths: every path bootstrap.toml names exists.
func checkPaths(in *Input) Result {
	r := Result{Check: "every path bootstrap.toml names exists"}
	c := in.Config
	need := func(key, rel string) {
		if _, err := c.RepoFile(key, rel); err != nil {
			r.Problems = append(r.Problems, Problem{c.Path, err.Error()})
		}
	}
	for _, name := range c.EnvironmentOrder {
		env := c.Environments[name]
		k := "environments." + name
		need(k+".sync-path", env.SyncPath)
		for i, p := range env.ProviderManifests {
			need(fmt.Sprintf("%s.provider-manifests[%d]", k, i), p)
		}
		for i, f := range env.MoveFallbacks {
			need(fmt.Sprintf("%s.move-fallbacks[%d].manifest", k, i), f.Manifest)
		}
		for i, p := range env.PivotManifests {
			need(fmt.Sprintf("%s.pivot-manifests[%d]", k, i), p)
		}
		for i, p := range env.PivotSOPSSecrets {
			need(fmt.Sprintf("%s.pivot-sops-secrets[%d]", k, i), p)
		}
	}
	return r
}

// fluxKustomizations returns the Flux Kustomizations among objs; with
// repoOnly, only those that build from this repository (source flux-system).
func fluxKustomizations(objs []Object, repoOnly bool) []Object {
	var out []Object
	for _, o := range objs {
		api, kind := o.Kind()
		if kind != "Kustomization" || !strings.HasPrefix(api, "kustomize.toolkit.fluxcd.io/") {
			continue
		}
		if repoOnly && str(o.Raw, "spec", "sourceRef", "name") != "flux-system" {
			continue
		}
		out = append(out, o)
	}
	return out
}

// checkKustomizationPaths: every Flux Kustomization that reads this
// repository (source flux-system) names a directory that exists and holds
// something to build. Flux would otherwise fail only once it gets there,
// possibly deep into a bootstrap.
func checkKustomizationPaths(in *Input) Result {
	r := Result{Check: "every Flux Kustomization path exists in the repository"}
	for _, o := range fluxKustomizations(in.Objects, true) {
		p := str(o.Raw, "spec", "path")
		rel := filepath.Clean(strings.TrimPrefix(p, "./"))
		if p == "" || rel == "." {
			r.Problems = append(r.Problems, Problem{o.String(), "spec.path is empty: name the directory to build"})
			continue
		}
		if filepath.IsAbs(rel) || strings.HasPrefix(rel, "..") {
			r.Problems = append(r.Problems, Problem{o.String(), fmt.Sprintf("spec.path %s leaves the repository", p)})
			continue
		}
		entries, err := os.ReadDir(filepath.Join(in.Root, rel))
		if err != nil {
			r.Problems = append(r.Problems, Problem{o.String(), fmt.Sprintf("spec.path %s does not exist in the repository", p)})
			continue
		}
		buildable := false
		for _, e := range entries {
			n := e.Name()
			buildable = buildable || (!e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || n == "Kustomization"))
		}
		if !buildable {
			r.Problems = append(r.Problems, Problem{o.String(), fmt.Sprintf("spec.path %s holds no kustomization and no YAML: Flux would apply nothing", p)})
		}
	}
	return r
}

// checkKustomizationConventions: every Flux Kustomization prunes (a file
// removed from Git must remove its objects, or teardown finds leftovers) and
// sets interval, retryInterval and timeout explicitly, so a failing step is
// retried on the project's schedule rather than Flux's defaults.
func checkKustomizationConventions(in *Input) Result {
	r := Result{Check: "every Flux Kustomization prunes and sets interval, retryInterval and timeout"}
	for _, o := range fluxKustomizations(in.Objects, false) {
		spec, _ := o.Raw["spec"].(map[string]any)
		if p, _ := spec["prune"].(bool); !p {
			r.Problems = append(r.Problems, Problem{o.String(), "prune is not true: objects removed from the tree would stay in the cluster"})
		}
		var missing []string
		for _, k := range []string{"interval", "retryInterval", "timeout"} {
			if v, _ := spec[k].(string); v == "" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			r.Problems = append(r.Problems, Problem{o.String(), "sets no " + strings.Join(missing, ", ") + " (the trees use interval 5m, retryInterval 2m, timeout 5m or longer)"})
		}
	}
	return r
}

// chartNames maps the chart names consumers use to the [charts] keys.
func chartPins(c *config.Config) map[string]string {
	return map[string]string{
		"flux-operator":        c.Charts.FluxOperator,
		"flux-instance":        c.Charts.FluxOperator,
		"cert-manager":         c.Charts.CertManager,
		"cluster-api-operator": c.Charts.CAPIOperator,
	}
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

// checkCharts: the version of every HelmRelease, HelmChartProxy and
// chart OCIRepository of a pinned chart equals bootstrap.toml [charts].
func checkCharts(in *Input) Result {
	r := Result{Check: "chart versions equal bootstrap.toml [charts]"}
	pins := chartPins(in.Config)
	compare := func(o Object, chart, version string) {
		pin, ok := pins[chart]
		if !ok || version == "" {
			return
		}
		if strings.TrimPrefix(version, "v") != strings.TrimPrefix(pin, "v") {
			r.Problems = append(r.Problems, Problem{o.String(), fmt.Sprintf("chart %s is at %s but bootstrap.toml [charts] pins %s", chart, version, pin)})
		}
	}
	for _, o := range in.Objects {
		_, kind := o.Kind()
		switch kind {
		case "HelmRelease":
			compare(o, str(o.Raw, "spec", "chart", "spec", "chart"), str(o.Raw, "spec", "chart", "spec", "version"))
		case "HelmChartProxy":
			compare(o, str(o.Raw, "spec", "chartName"), str(o.Raw, "spec", "version"))
		case "OCIRepository", "HelmRepository":
			url := str(o.Raw, "spec", "url")
			compare(o, url[strings.LastIndex(url, "/")+1:], str(o.Raw, "spec", "ref", "tag"))
		}
	}
	return r
}

// checkVersions: a provider runs at one version in every environment, and
// the objects that use its kinds were checked against the CRDs of that very
// version. Otherwise the schema check would vouch for a different release
// than the one deployed.
func checkVersions(in *Input) Result {
	r := Result{Check: "provider and chart versions agree across environments and with the CRDs checked against"}
	schemaSets := map[string]crds.Set{}
	for _, set := range crds.All() {
		for _, p := range set.Providers {
			schemaSets[p] = set
		}
	}
	type use struct{ version, where string }
	byProvider := map[string][]use{}
	for _, o := range in.Objects {
		api, kind := o.Kind()
		if !strings.HasPrefix(api, "operator.cluster.x-k8s.io/") || !strings.HasSuffix(kind, "Provider") {
			continue
		}
		md, _ := o.Raw["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		key := kind + "/" + name
		byProvider[key] = append(byProvider[key], use{str(o.Raw, "spec", "version"), o.String()})
	}
	var keys []string
	for k := range byProvider {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		uses := byProvider[k]
		versions := map[string][]string{}
		for _, u := range uses {
			versions[u.version] = append(versions[u.version], u.where)
		}
		if len(versions) > 1 {
			var parts []string
			for v, ws := range versions {
				parts = append(parts, fmt.Sprintf("%s in %s", v, strings.Join(ws, ", ")))
			}
			sort.Strings(parts)
			r.Problems = append(r.Problems, Problem{k, "deployed at different versions: " + strings.Join(parts, "; ")})
		}
		set, ok := schemaSets[k]
		if !ok {
			continue
		}
		for v, ws := range versions {
			if !set.Covers(v) {
				r.Problems = append(r.Problems, Problem{ws[0], fmt.Sprintf("%s %s is deployed, but its objects are checked against the CRDs of %s@%s: move the %s set in tools/crds to %s, or the trees back", k, v, set.Module, set.Version, set.Name, v)})
			}
		}
	}
	pins := chartPins(in.Config)
	for _, set := range crds.All() {
		if v := pins[set.Chart]; set.Chart != "" && v != "" && !set.Covers(v) {
			r.Problems = append(r.Problems, Problem{in.Config.Path + ": [charts] " + set.Chart, fmt.Sprintf("pins %s, but objects are checked against the CRDs of %s@%s: move them together (tools/crds)", v, set.Module, set.Version)})
		}
	}
	return r
}

// awsTeardown is the part of an environment's table the aws provider owns
// that this repository names by rule; read from what the plugin receives.
type awsTeardown struct {
	Environment struct {
		Teardown struct {
			AWSWorkloads []struct {
				Region         string `json:"region"`
				ClusterName    string `json:"cluster-name"`
				EKSClusterName string `json:"eks-cluster-name"`
				RDSInstance    string `json:"rds-instance"`
			} `json:"aws-workloads"`
			MgmtEKSClusterName string `json:"mgmt-eks-cluster-name"`
		} `json:"teardown"`
	} `json:"environment"`
}

// checkNaming: the aws teardown names follow this repository's cluster
// naming rules.
func checkNaming(in *Input) Result {
	r := Result{Check: "teardown names follow the cluster naming"}
	c := in.Config
	ns := c.Bootstrap.MgmtNamespace
	for _, name := range c.EnvironmentOrder {
		var fc awsTeardown
		raw, err := c.ProviderJSON(name)
		if err == nil {
			err = json.Unmarshal(raw, &fc)
		}
		if err != nil {
			r.Problems = append(r.Problems, Problem{fmt.Sprintf("%s: environments.%s.teardown", c.Path, name), err.Error()})
			continue
		}
		td := fc.Environment.Teardown
		for i, w := range td.AWSWorkloads {
			where := fmt.Sprintf("%s: environments.%s.teardown.aws-workloads[%d]", c.Path, name, i)
			if want := ns + "_" + w.ClusterName + "-control-plane"; w.EKSClusterName != want {
				r.Problems = append(r.Problems, Problem{where, fmt.Sprintf("eks-cluster-name %q should be %q (<namespace>_<cluster>-control-plane)", w.EKSClusterName, want)})
			}
			if want := "krops-" + w.ClusterName + "-db"; w.RDSInstance != want {
				r.Problems = append(r.Problems, Problem{where, fmt.Sprintf("rds-instance %q should be %q", w.RDSInstance, want)})
			}
			if !strings.HasPrefix(w.ClusterName, w.Region) {
				r.Problems = append(r.Problems, Problem{where, fmt.Sprintf("cluster-name %q should start with its region %q", w.ClusterName, w.Region)})
			}
		}
		if td.MgmtEKSClusterName != "" {
			mgmt := c.Environments[name].MgmtCluster
			if want := ns + "_" + mgmt + "-control-plane"; td.MgmtEKSClusterName != want {
				r.Problems = append(r.Problems, Problem{fmt.Sprintf("%s: environments.%s.teardown", c.Path, name), fmt.Sprintf("mgmt-eks-cluster-name %q should be %q", td.MgmtEKSClusterName, want)})
			}
		}
	}
	return r
}

var (
	placeholder = regexp.MustCompile(`\$\{(KROPS_[A-Z0-9_]+)(:=|:-)?([^}]*)\}`)
	quotedValue = regexp.MustCompile(`:\s*(["'])(.*)(["'])\s*$`)
	// quotedKey: a mapping key that is one quoted placeholder (the provider
	// objects' fetchConfig picks its key, url or oci, by one).
	quotedKey = regexp.MustCompile(`^\s*(?:-\s+)?(["'])(\$\{[^}]*\})(["']):(\s|$)`)
)

// checkPlaceholders: every ${KROPS_*} is quoted and has a default, so an
// unset run tag renders as a valid string instead of breaking the object.
// A placeholder whose default is a JSON list or map, or a boolean, stands
// for data of that type (Flux substitutes into the built YAML, where it
// parses as one): it must be the whole value, unquoted, so the file says
// what Flux applies (kustomize's build drops the quotes anyway).
func checkPlaceholders(in *Input) Result {
	r := Result{Check: "every ${KROPS_*} placeholder is quoted and has a default"}
	for _, f := range sortedFiles(in.Files) {
		for n, line := range strings.Split(string(in.Files[f]), "\n") {
			for _, m := range placeholder.FindAllStringSubmatch(line, -1) {
				where := fmt.Sprintf("%s:%d", f, n+1)
				if m[2] == "" {
					r.Problems = append(r.Problems, Problem{where, fmt.Sprintf("${%s} has no default: write ${%s:=<default>}", m[1], m[1])})
				}
				if typed(m[3]) {
					if !strings.HasSuffix(strings.TrimSpace(line), ": "+m[0]) {
						r.Problems = append(r.Problems, Problem{where, fmt.Sprintf("%s stands for a list, map or boolean: it must be the whole value, unquoted (key: %s)", m[0], m[0])})
					}
					continue
				}
				if k := quotedKey.FindStringSubmatch(line); k != nil && k[1] == k[3] && k[2] == m[0] {
					continue
				}
				if q := quotedValue.FindStringSubmatch(line); q == nil || q[1] != q[3] || !strings.Contains(q[2], m[0]) {
					r.Problems = append(r.Problems, Problem{where, fmt.Sprintf("%s must be inside a quoted string", m[0])})
				}
			}
		}
	}
	return r
}

// typed: a placeholder default that YAML reads as other than a string.
func typed(def string) bool {
	return strings.HasPrefix(def, "[") || strings.HasPrefix(def, "{") || def == "true" || def == "false"
}

var anyPlaceholder = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(:[=-][^}]*)?\}`)

// checkSubstitution: Flux runs variable substitution only when at least one
// variable is defined. A Kustomization whose only sources are optional
// ConfigMaps (krops-run) would, when they are absent, apply its
// ${VAR:=default} placeholders literally: a label then fails validation, and
// a cloud tag carries the text "${KROPS_RUN_ID:=unknown}". So a Kustomization
// that builds placeholders must define a variable that is always there:
// postBuild.substitute, or a substituteFrom that is not optional.
func checkSubstitution(in *Input) Result {
	r := Result{Check: "every Kustomization that builds ${...} placeholders always substitutes"}
	byRoot := map[string][]Object{}
	for _, o := range in.Objects {
		byRoot[o.Root] = append(byRoot[o.Root], o)
	}
	for _, o := range fluxKustomizations(in.Objects, true) {
		root := filepath.Clean(strings.TrimPrefix(str(o.Raw, "spec", "path"), "./"))
		found := ""
		for _, built := range byRoot[root] {
			b, _ := yaml.Marshal(built.Raw)
			if m := anyPlaceholder.Find(b); m != nil {
				found = fmt.Sprintf("%s in %s", m, built.String())
				break
			}
		}
		if found == "" {
			continue
		}
		spec, _ := o.Raw["spec"].(map[string]any)
		post, _ := spec["postBuild"].(map[string]any)
		always := false
		if sub, _ := post["substitute"].(map[string]any); len(sub) > 0 {
			always = true
		}
		from, _ := post["substituteFrom"].([]any)
		for _, f := range from {
			fm, _ := f.(map[string]any)
			if opt, _ := fm["optional"].(bool); !opt {
				always = true
			}
		}
		if !always {
			r.Problems = append(r.Problems, Problem{o.String(), fmt.Sprintf("builds %s but defines no variable that is always there, so Flux would apply it literally when the optional sources are absent: add postBuild.substitute (for example KROPS_ENVIRONMENT)", found)})
		}
	}
	return r
}

// checkDependsOn: Flux dependsOn names resolve.
func checkDependsOn(in *Input) Result {
	r := Result{Check: "every dependsOn names an object that exists"}
	known := map[string]bool{}
	for _, o := range in.Objects {
		a, k := o.Kind()
		if strings.HasPrefix(a, "kustomize.toolkit.fluxcd.io/") || strings.HasPrefix(a, "helm.toolkit.fluxcd.io/") {
			known[k+"/"+o.Name()] = true
		}
	}
	for _, o := range in.Objects {
		a, k := o.Kind()
		if !strings.HasPrefix(a, "kustomize.toolkit.fluxcd.io/") && !strings.HasPrefix(a, "helm.toolkit.fluxcd.io/") {
			continue
		}
		spec, _ := o.Raw["spec"].(map[string]any)
		deps, _ := spec["dependsOn"].([]any)
		md, _ := o.Raw["metadata"].(map[string]any)
		ownNS, _ := md["namespace"].(string)
		for _, d := range deps {
			dm, _ := d.(map[string]any)
			name, _ := dm["name"].(string)
			ns, _ := dm["namespace"].(string)
			if ns == "" {
				ns = ownNS
			}
			key := k + "/" + name
			if ns != "" {
				key = k + "/" + ns + "/" + name
			}
			if !known[key] {
				r.Problems = append(r.Problems, Problem{o.String(), fmt.Sprintf("dependsOn %s names no %s in the trees", name, k)})
			}
		}
	}
	return r
}

// checkSecrets: Secrets live only in SOPS-encrypted files.
func checkSecrets(in *Input) Result {
	r := Result{Check: "no plain-text Secret (only *.sops.yaml)"}
	for _, f := range sortedFiles(in.Files) {
		if strings.HasSuffix(f, ".sops.yaml") {
			continue
		}
		for _, doc := range bytes.Split(in.Files[f], []byte("\n---")) {
			var m map[string]any
			if yaml.Unmarshal(doc, &m) != nil {
				continue
			}
			if m["kind"] == "Secret" && (m["data"] != nil || m["stringData"] != nil) && !onlyPlaceholders(m) {
				md, _ := m["metadata"].(map[string]any)
				r.Problems = append(r.Problems, Problem{f, fmt.Sprintf("Secret %v holds data in plain text: encrypt it with SOPS into a *.sops.yaml file", md["name"])})
			}
		}
	}
	return r
}

// onlyPlaceholders reports whether every stringData value of a Secret is a
// ${VAR} substituted at apply time: such a file holds no secret material.
func onlyPlaceholders(m map[string]any) bool {
	if m["data"] != nil {
		return false
	}
	sd, _ := m["stringData"].(map[string]any)
	for _, v := range sd {
		s, _ := v.(string)
		if !wholePlaceholder.MatchString(s) {
			return false
		}
	}
	return len(sd) > 0
}

var wholePlaceholder = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*(:[=-][^}]*)?\}$`)

// checkImages: every container image the trees deploy is in the air-gap
// inventory with its tag and digest. A pending entry is not enough here: the
// trees run these images, so they must be pinned now.
func checkImages(in *Input) Result {
	r := Result{Check: "every image is in airgap/images.txt with tag and digest"}
	images := map[string][]string{}
	for _, o := range in.Objects {
		collectImages(o.Raw, func(img string) { images[img] = append(images[img], o.String()) })
	}
	if in.Images == nil {
		if len(images) > 0 {
			r.Problems = append(r.Problems, Problem{"airgap/images.txt", "missing: list every image as repo:tag@sha256:<digest>"})
		}
		return r
	}
	inv, problems := imageinventory.Parse(in.Images)
	for _, p := range problems {
		r.Problems = append(r.Problems, Problem{fmt.Sprintf("airgap/images.txt:%d", p.Line), p.Message})
	}
	var names []string
	for img := range images {
		names = append(names, img)
	}
	sort.Strings(names)
	for _, img := range names {
		e, ok := inv.Lookup(img)
		switch {
		case !ok:
			r.Problems = append(r.Problems, Problem{images[img][0], fmt.Sprintf("image %s is not in airgap/images.txt", img)})
		case e.Pending:
			r.Problems = append(r.Problems, Problem{images[img][0], fmt.Sprintf("image %s is pending in airgap/images.txt (line %d): the trees deploy it, so pin it (krops-airgap pin)", e.Image, e.Line)})
		case strings.Contains(img, "@") && e.Digest != "" && !strings.HasSuffix(img, "@"+e.Digest):
			r.Problems = append(r.Problems, Problem{images[img][0], fmt.Sprintf("image %s does not carry the digest airgap/images.txt pins (line %d: %s)", img, e.Line, e.Digest)})
		}
	}
	if n := len(inv.Pending()); n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d inventory entries are pending a digest (krops-airgap check lists them)", n))
	}
	return r
}

// collectImages finds container images: "image" strings inside containers
// and initContainers lists.
func collectImages(v any, add func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if k == "containers" || k == "initContainers" {
				if list, ok := c.([]any); ok {
					for _, item := range list {
						if m, ok := item.(map[string]any); ok {
							if img, ok := m["image"].(string); ok && img != "" {
								add(img)
							}
						}
					}
				}
			}
			collectImages(c, add)
		}
	case []any:
		for _, c := range t {
			collectImages(c, add)
		}
	}
}

func sortedFiles(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
