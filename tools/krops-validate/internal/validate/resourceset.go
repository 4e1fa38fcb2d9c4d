package validate

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// resourceSets renders the resources of every Flux Operator ResourceSet
// once per input, the way the operator does (each resource a Go template
// with << >> delimiters, where inputs returns the current input), so the
// objects a ResourceSet creates are checked like any other: schema,
// dependsOn, Kustomization paths, images. Rendering errors are returned per
// ResourceSet and input. A template that calls one of the operator's helper
// functions (sprig, slugify, toYaml) is not rendered here; it is named in
// notes instead of passing silently.
func resourceSets(objs []Object) (rendered []Object, errs map[string]error, notes []string) {
	errs = map[string]error{}
	for _, o := range objs {
		api, kind := o.Kind()
		if kind != "ResourceSet" || !strings.HasPrefix(api, "fluxcd.controlplane.io/") {
			continue
		}
		where := fmt.Sprintf("%s, ResourceSet %s", o.Root, o.Name())
		spec, _ := o.Raw["spec"].(map[string]any)
		inputs, _ := spec["inputs"].([]any)
		resources, _ := spec["resources"].([]any)
		if len(inputs) == 0 {
			// Without inputs the operator renders the resources once.
			inputs = []any{map[string]any{}}
		}
		for i, in := range inputs {
			at := fmt.Sprintf("%s input %d", where, i)
			for j, res := range resources {
				body, err := yaml.Marshal(res)
				if err != nil {
					errs[at] = err
					continue
				}
				tmpl, err := template.New(o.Name()).Delims("<<", ">>").Option("missingkey=error").
					Funcs(template.FuncMap{"inputs": func() any { return in }}).Parse(string(body))
				if err != nil && strings.Contains(err.Error(), "function \"") {
					notes = append(notes, fmt.Sprintf("%s resource %d not rendered: %v (only << inputs.x >> is rendered here)", where, j, err))
					continue
				}
				if err != nil {
					errs[at] = fmt.Errorf("resource %d: template: %w", j, err)
					continue
				}
				var buf bytes.Buffer
				if err := tmpl.Execute(&buf, nil); err != nil {
					errs[at] = fmt.Errorf("resource %d: template: %w", j, err)
					continue
				}
				var m map[string]any
				if err := yaml.Unmarshal(buf.Bytes(), &m); err != nil {
					errs[at] = fmt.Errorf("resource %d: rendered YAML: %w", j, err)
					continue
				}
				rendered = append(rendered, Object{Root: at, Raw: m})
			}
		}
	}
	return rendered, errs, notes
}
