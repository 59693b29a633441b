// Package k8s checks ringkv's Kubernetes manifests without a cluster: every document of every
// file that kustomization.yaml lists decodes strictly (unknown fields fail) into the
// k8s.io/api types, and the StatefulSets, Services and PodDisruptionBudget have what an
// operator relies on. It is its own module so the main one does not pull k8s.io/api.
package k8s

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

type manifests struct {
	sets     map[string]*appsv1.StatefulSet
	services map[string]*corev1.Service
	pdbs     []*policyv1.PodDisruptionBudget
}

// load decodes every resource of kustomization.yaml strictly.
func load(t *testing.T) manifests {
	t.Helper()
	var kust struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Labels     []any    `json:"labels"`
		Images     []any    `json:"images"`
	}
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob("*.yaml")
	for _, f := range files {
		if f != "kustomization.yaml" && !slices.Contains(kust.Resources, f) {
			t.Errorf("%s is not listed in kustomization.yaml's resources", f)
		}
	}
	m := manifests{sets: map[string]*appsv1.StatefulSet{}, services: map[string]*corev1.Service{}}
	for _, f := range kust.Resources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s #%d: %v", f, i, err)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 StatefulSet":
				s := &appsv1.StatefulSet{}
				obj, m.sets[fmt.Sprint(f, i)] = s, s
			case "v1 Service":
				s := &corev1.Service{}
				obj, m.services[fmt.Sprint(f, i)] = s, s
			case "policy/v1 PodDisruptionBudget":
				p := &policyv1.PodDisruptionBudget{}
				obj = p
				m.pdbs = append(m.pdbs, p)
			default:
				t.Fatalf("%s #%d: unexpected %s %s", f, i, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s #%d (%s): %v", f, i, head.Kind, err)
			}
		}
	}
	// Key by name from here on.
	sets, svcs := map[string]*appsv1.StatefulSet{}, map[string]*corev1.Service{}
	for _, s := range m.sets {
		sets[s.Name] = s
	}
	for _, s := range m.services {
		svcs[s.Name] = s
	}
	m.sets, m.services = sets, svcs
	return m
}

func TestManifests(t *testing.T) {
	m := load(t)
	founders, extra := m.sets["ringkv"], m.sets["ringkv-extra"]
	headless, public := m.services["ringkv"], m.services["ringkv-public"]
	if founders == nil || extra == nil || headless == nil || public == nil || len(m.pdbs) != 1 {
		t.Fatalf("got sets %v, services %v, %d PDBs; want ringkv and ringkv-extra, ringkv and ringkv-public, 1", keys(m.sets), keys(m.services), len(m.pdbs))
	}
	if got := *founders.Spec.Replicas; got != 3 {
		t.Errorf("founders: got %d replicas, want 3", got)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless service: got clusterIP %q publishNotReadyAddresses %v, want None and true", headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	for _, svc := range []*corev1.Service{headless, public} {
		for _, s := range []*appsv1.StatefulSet{founders, extra} {
			if !selects(svc.Spec.Selector, s.Spec.Template.Labels) {
				t.Errorf("service %s does not select the pods of %s", svc.Name, s.Name)
			}
		}
		var ports []int32
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.Port)
		}
		if !slices.Contains(ports, 9090) || !slices.Contains(ports, 8080) {
			t.Errorf("service %s: got ports %v, want 9090 and 8080", svc.Name, ports)
		}
	}
	pdb := m.pdbs[0]
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB: got maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	for _, s := range []*appsv1.StatefulSet{founders, extra} {
		if !selects(pdb.Spec.Selector.MatchLabels, s.Spec.Template.Labels) {
			t.Errorf("PDB does not cover the pods of %s", s.Name)
		}
		t.Run(s.Name, func(t *testing.T) { checkSet(t, s, headless.Name) })
	}

	// The founders' --peers: every founder by its pod DNS name under the headless service;
	// the extra nodes have none (they await kvctl ring add).
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("ringkv-%d=ringkv-%d.ringkv.$(POD_NAMESPACE).svc.cluster.local:9090", i, i))
	}
	if got := flag(founders, "--peers"); got != strings.Join(want, ",") {
		t.Errorf("founders' --peers: got %q, want %q", got, strings.Join(want, ","))
	}
	if got := flag(extra, "--peers"); got != "" {
		t.Errorf("extra nodes' --peers: got %q, want none", got)
	}
}

func checkSet(t *testing.T, s *appsv1.StatefulSet, headless string) {
	if s.Spec.ServiceName != headless {
		t.Errorf("got serviceName %q, want %q", s.Spec.ServiceName, headless)
	}
	if !selects(s.Spec.Selector.MatchLabels, s.Spec.Template.Labels) {
		t.Errorf("selector %v does not match the template's labels %v", s.Spec.Selector.MatchLabels, s.Spec.Template.Labels)
	}
	pod := s.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe: got none, want GET %s", p.name, p.path)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Scheme != corev1.URISchemeHTTPS || g.Port.String() != "admin" {
			t.Errorf("%s probe: got %s %s port %s, want HTTPS %s on admin", p.name, g.Scheme, g.Path, g.Port.String(), p.path)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "admin" && p.ContainerPort == 7070 }) {
		t.Errorf("got ports %v, want admin on 7070", c.Ports)
	}
	aa := pod.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 ||
		aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("got affinity %+v, want required pod anti-affinity by kubernetes.io/hostname", aa)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 40 {
		t.Errorf("got terminationGracePeriodSeconds %v, want at least 40 (the 30s drain and the flush)", g)
	}
	if got := flag(s, "--drain-timeout"); got != "30s" {
		t.Errorf("got --drain-timeout %q, want 30s", got)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("got pod securityContext %+v, want runAsNonRoot", sc)
	}
	if got := flag(s, "--advertise"); got != "$(POD_NAME).ringkv.$(POD_NAMESPACE).svc.cluster.local:9090" {
		t.Errorf("got --advertise %q, want the pod's DNS name", got)
	}
	// Certificates from the Secret, mounted where --certs-dir points; the CA's key stays out.
	certsDir := flag(s, "--certs-dir")
	var secret *corev1.SecretVolumeSource
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secret = v.Secret
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name && m.MountPath == certsDir }) {
				t.Errorf("secret volume %s is not mounted at --certs-dir %q", v.Name, certsDir)
			}
		}
	}
	if secret == nil {
		t.Fatal("got no Secret volume, want the certificates from one")
	}
	var items []string
	for _, it := range secret.Items {
		items = append(items, it.Path)
	}
	if !slices.Equal(items, []string{"ca.crt", "node.crt", "node.key"}) {
		t.Errorf("got secret items %v, want ca.crt node.crt node.key", items)
	}
	// Data on a claim per pod, mounted where --data points.
	if len(s.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("got %d volumeClaimTemplates, want 1", len(s.Spec.VolumeClaimTemplates))
	}
	claim := s.Spec.VolumeClaimTemplates[0].Name
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == claim && m.MountPath == flag(s, "--data") }) {
		t.Errorf("claim %s is not mounted at --data %q", claim, flag(s, "--data"))
	}
}

// flag is the value of --name=value among the container's args ("" when absent).
func flag(s *appsv1.StatefulSet, name string) string {
	for _, a := range s.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
