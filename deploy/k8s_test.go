package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// The Kubernetes objects the chart renders, as far as the chart uses them.
// Rendered documents are decoded strictly (yaml KnownFields), so a
// misspelt or misplaced field is an error, as kubeconform's schemas would
// report it; fields the chart does not use are not listed and are errors
// too, which keeps these types honest about what is checked.

type objectMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type deployment struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Replicas *int          `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Template struct {
			Metadata objectMeta `yaml:"metadata"`
			Spec     podSpec    `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	ImagePullSecrets              []struct{ Name string } `yaml:"imagePullSecrets"`
	SecurityContext               map[string]any          `yaml:"securityContext"`
	TerminationGracePeriodSeconds *int                    `yaml:"terminationGracePeriodSeconds"`
	NodeSelector                  map[string]string       `yaml:"nodeSelector"`
	Tolerations                   []map[string]any        `yaml:"tolerations"`
	Affinity                      map[string]any          `yaml:"affinity"`
	Containers                    []container             `yaml:"containers"`
}

type container struct {
	Name            string         `yaml:"name"`
	Image           string         `yaml:"image"`
	ImagePullPolicy string         `yaml:"imagePullPolicy"`
	Command         []string       `yaml:"command"`
	SecurityContext map[string]any `yaml:"securityContext"`
	Ports           []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	Env            []envVar       `yaml:"env"`
	LivenessProbe  *probe         `yaml:"livenessProbe"`
	ReadinessProbe *probe         `yaml:"readinessProbe"`
	Resources      map[string]any `yaml:"resources"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type service struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Type                  string            `yaml:"type"`
		ExternalTrafficPolicy string            `yaml:"externalTrafficPolicy"`
		Selector              map[string]string `yaml:"selector"`
		Ports                 []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type configMap struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   objectMeta        `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
}

type secret struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   objectMeta        `yaml:"metadata"`
	Type       string            `yaml:"type"`
	Data       map[string]string `yaml:"data"`
}

type hpa struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas int `yaml:"minReplicas"`
		MaxReplicas int `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource struct {
				Name   string `yaml:"name"`
				Target struct {
					Type               string `yaml:"type"`
					AverageUtilization int    `yaml:"averageUtilization"`
				} `yaml:"target"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
		Behavior map[string]any `yaml:"behavior"`
	} `yaml:"spec"`
}

type pdb struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		MinAvailable   any           `yaml:"minAvailable"`
		MaxUnavailable any           `yaml:"maxUnavailable"`
		Selector       labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type ingress struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		IngressClassName string `yaml:"ingressClassName"`
		TLS              []struct {
			Hosts      []string `yaml:"hosts"`
			SecretName string   `yaml:"secretName"`
		} `yaml:"tls"`
		Rules []struct {
			Host string `yaml:"host"`
			HTTP struct {
				Paths []struct {
					Path     string `yaml:"path"`
					PathType string `yaml:"pathType"`
					Backend  struct {
						Service struct {
							Name string `yaml:"name"`
							Port struct {
								Name   string `yaml:"name"`
								Number int    `yaml:"number"`
							} `yaml:"port"`
						} `yaml:"service"`
					} `yaml:"backend"`
				} `yaml:"paths"`
			} `yaml:"http"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

// manifests is a rendered chart, by kind.
type manifests struct {
	Deployments []deployment
	Services    []service
	ConfigMaps  []configMap
	Secrets     []secret
	HPAs        []hpa
	PDBs        []pdb
	Ingresses   []ingress
}

// kinds maps apiVersion/kind to the slice a document goes to.
func (m *manifests) target(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		m.Deployments = append(m.Deployments, deployment{})
		return &m.Deployments[len(m.Deployments)-1], nil
	case "v1 Service":
		m.Services = append(m.Services, service{})
		return &m.Services[len(m.Services)-1], nil
	case "v1 ConfigMap":
		m.ConfigMaps = append(m.ConfigMaps, configMap{})
		return &m.ConfigMaps[len(m.ConfigMaps)-1], nil
	case "v1 Secret":
		m.Secrets = append(m.Secrets, secret{})
		return &m.Secrets[len(m.Secrets)-1], nil
	case "autoscaling/v2 HorizontalPodAutoscaler":
		m.HPAs = append(m.HPAs, hpa{})
		return &m.HPAs[len(m.HPAs)-1], nil
	case "policy/v1 PodDisruptionBudget":
		m.PDBs = append(m.PDBs, pdb{})
		return &m.PDBs[len(m.PDBs)-1], nil
	case "networking.k8s.io/v1 Ingress":
		m.Ingresses = append(m.Ingresses, ingress{})
		return &m.Ingresses[len(m.Ingresses)-1], nil
	}
	return nil, fmt.Errorf("unexpected apiVersion %q kind %q", apiVersion, kind)
}

// parseManifests decodes the documents of helm template's output strictly.
func parseManifests(out []byte) (*manifests, error) {
	m := &manifests{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for i := 0; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(node.Content) == 0 {
			continue
		}
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if err := node.Decode(&head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		obj, err := m.target(head.APIVersion, head.Kind)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		doc, err := yaml.Marshal(&node)
		if err != nil {
			return nil, err
		}
		strict := yaml.NewDecoder(bytes.NewReader(doc))
		strict.KnownFields(true)
		if err := strict.Decode(obj); err != nil {
			return nil, fmt.Errorf("%s (document %d): %w", head.Kind, i, err)
		}
	}
}

// dnsLabel is a Kubernetes object name that may also be a DNS label
// (Services need it).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// selects reports whether every label of sel is in labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// env returns a container's variable by name.
func (c container) env(name string) (envVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return envVar{}, false
}

// hasPort reports whether the container declares a port of that name or
// number.
func (c container) hasPort(p any) bool {
	for _, cp := range c.Ports {
		if fmt.Sprint(p) == cp.Name || fmt.Sprint(p) == fmt.Sprint(cp.ContainerPort) {
			return true
		}
	}
	return false
}

// check returns what is wrong with the rendered objects as a whole: names,
// selectors that select nothing, references to objects or ports that do
// not exist, probes missing.
func (m *manifests) check(existingSecret string) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	names := map[string]bool{}
	name := func(kind, n string) {
		if len(n) > 63 || !dnsLabel.MatchString(n) {
			bad("%s %q: not a DNS label", kind, n)
		}
		if names[kind+"/"+n] {
			bad("%s %q rendered twice", kind, n)
		}
		names[kind+"/"+n] = true
	}
	for _, c := range m.ConfigMaps {
		name("ConfigMap", c.Metadata.Name)
	}
	secretKeys := map[string]map[string]bool{}
	for _, s := range m.Secrets {
		name("Secret", s.Metadata.Name)
		secretKeys[s.Metadata.Name] = map[string]bool{}
		for k := range s.Data {
			secretKeys[s.Metadata.Name][k] = true
		}
	}
	deps := map[string]deployment{}
	for _, d := range m.Deployments {
		name("Deployment", d.Metadata.Name)
		deps[d.Metadata.Name] = d
		tpl := d.Spec.Template
		if !selects(d.Spec.Selector.MatchLabels, tpl.Metadata.Labels) {
			bad("Deployment %s: selector %v does not select its pods %v", d.Metadata.Name, d.Spec.Selector.MatchLabels, tpl.Metadata.Labels)
		}
		if len(tpl.Spec.Containers) == 0 {
			bad("Deployment %s: no container", d.Metadata.Name)
		}
		for _, c := range tpl.Spec.Containers {
			where := d.Metadata.Name + "/" + c.Name
			if c.Image == "" || strings.HasSuffix(c.Image, ":") {
				bad("%s: image %q", where, c.Image)
			}
			for path, p := range map[string]*probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
				if p == nil || p.HTTPGet.Path != path || !c.hasPort(p.HTTPGet.Port) {
					bad("%s: no probe on %s of a declared port: %+v", where, path, p)
				}
			}
			for _, ef := range c.EnvFrom {
				if !names["ConfigMap/"+ef.ConfigMapRef.Name] {
					bad("%s: envFrom names ConfigMap %q, not rendered", where, ef.ConfigMapRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				switch {
				case ref.Name == existingSecret:
				case secretKeys[ref.Name] == nil:
					bad("%s: %s names Secret %q, not rendered", where, e.Name, ref.Name)
				case !secretKeys[ref.Name][ref.Key] && !ref.Optional:
					bad("%s: %s names key %q, not in Secret %s", where, e.Name, ref.Key, ref.Name)
				}
			}
		}
	}
	for _, s := range m.Services {
		name("Service", s.Metadata.Name)
		var target *deployment
		for _, d := range m.Deployments {
			if selects(s.Spec.Selector, d.Spec.Template.Metadata.Labels) {
				target = &d
			}
		}
		if target == nil {
			bad("Service %s: selector %v selects no Deployment's pods", s.Metadata.Name, s.Spec.Selector)
			continue
		}
		for _, p := range s.Spec.Ports {
			if !target.Spec.Template.Spec.Containers[0].hasPort(p.TargetPort) {
				bad("Service %s: targetPort %v is no port of %s", s.Metadata.Name, p.TargetPort, target.Metadata.Name)
			}
		}
	}
	for _, h := range m.HPAs {
		name("HorizontalPodAutoscaler", h.Metadata.Name)
		ref := h.Spec.ScaleTargetRef
		d, ok := deps[ref.Name]
		switch {
		case ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || !ok:
			bad("HPA %s: scales %s %s, not rendered", h.Metadata.Name, ref.Kind, ref.Name)
		case d.Spec.Replicas != nil:
			bad("HPA %s: Deployment %s also sets replicas (every upgrade would reset the scale)", h.Metadata.Name, ref.Name)
		}
		if h.Spec.MinReplicas < 1 || h.Spec.MinReplicas > h.Spec.MaxReplicas || len(h.Spec.Metrics) == 0 {
			bad("HPA %s: replicas %d..%d, %d metrics", h.Metadata.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas, len(h.Spec.Metrics))
		}
	}
	for _, p := range m.PDBs {
		name("PodDisruptionBudget", p.Metadata.Name)
		if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
			bad("PDB %s: set exactly one of minAvailable and maxUnavailable", p.Metadata.Name)
		}
		n := 0
		for _, d := range m.Deployments {
			if selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
				n++
			}
		}
		if n != 1 {
			bad("PDB %s: selects the pods of %d Deployments, want 1", p.Metadata.Name, n)
		}
	}
	for _, in := range m.Ingresses {
		name("Ingress", in.Metadata.Name)
		for _, r := range in.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				if !names["Service/"+p.Backend.Service.Name] {
					bad("Ingress %s: path %s goes to Service %q, not rendered", in.Metadata.Name, p.Path, p.Backend.Service.Name)
				}
			}
		}
	}
	return errs
}
