package packaging

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestHelmChart lints helm/sluice and renders it with its defaults and
// with TLS, the bootstrap user and a ServiceMonitor on, and checks what
// the rendered objects must hold: a StatefulSet with a volume claim,
// probes on /healthz and /readyz, scrape annotations, the secrets'
// references, and only SLUICE_* variables sluice serve knows.
func TestHelmChart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs helm")
	}
	helm := tool(t, "helm", helmPkg, helmVer)
	chart := filepath.Join("helm", "sluice")
	run(t, ".", nil, helm, "lint", "--strict", chart)
	full := []string{"--set", "tls.enabled=true,tls.secretName=sluice-tls,tls.clientCA=true",
		"--set", "bootstrapUser.enabled=true,bootstrapUser.password=s3cret",
		"--set", "metrics.serviceMonitor.enabled=true"}
	run(t, ".", nil, helm, append([]string{"lint", "--strict", chart}, full...)...)

	known := serveEnvNames(t)
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"defaults", nil, []string{"PLAINTEXT://0.0.0.0:9092", "PLAINTEXT://$(POD_NAME).rel-sluice-headless.ns.svc:9092"}},
		{"secure", full, []string{"SASL_SSL://0.0.0.0:9092", "/etc/sluice/tls/ca.crt", "$(BOOTSTRAP_USERNAME):$(BOOTSTRAP_PASSWORD)", "ServiceMonitor"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := run(t, ".", nil, helm, append([]string{"template", "rel", chart, "--namespace", "ns"}, c.args...)...)
			objs := decodeAll(t, out)
			sts := objs["StatefulSet"]
			if sts == nil {
				t.Fatalf("no StatefulSet rendered:\n%s", out)
			}
			spec := sts["spec"].(map[string]any)
			if claims, _ := spec["volumeClaimTemplates"].([]any); len(claims) != 1 {
				t.Errorf("StatefulSet volumeClaimTemplates %v, want one claim", spec["volumeClaimTemplates"])
			}
			pod := spec["template"].(map[string]any)
			ann := pod["metadata"].(map[string]any)["annotations"].(map[string]any)
			if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9644" {
				t.Errorf("pod annotations %v lack the Prometheus scrape ones", ann)
			}
			ctr := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
				p, _ := ctr[probe].(map[string]any)
				if p == nil || p["httpGet"].(map[string]any)["path"] != path {
					t.Errorf("%s %v, want GET %s", probe, ctr[probe], path)
				}
			}
			for _, e := range ctr["env"].([]any) {
				name := e.(map[string]any)["name"].(string)
				if strings.HasPrefix(name, "SLUICE_") && !known[name] {
					t.Errorf("the chart sets %s, which sluice serve does not read", name)
				}
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("rendered chart lacks %q", w)
				}
			}
		})
	}
	// A bootstrap user without a password or Secret is refused.
	cmd := exec.Command(helm, "template", "rel", chart, "--set", "bootstrapUser.enabled=true")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "bootstrapUser.password is required") {
		t.Errorf("bootstrap user without password: %v\n%s", err, out)
	}
}

// decodeAll maps each rendered object's kind to it (the last of a kind).
func decodeAll(t *testing.T, manifests string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			if err.Error() == "EOF" {
				return objs
			}
			t.Fatalf("rendered chart: %v", err)
		}
		if k, ok := o["kind"].(string); ok {
			objs[k] = o
		}
	}
}

// serveEnvNames lists the environment variables sluice serve reads: one
// per flag of `sluice serve --help`, and SLUICE_BOOTSTRAP_USER.
func serveEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "run", "./cmd/sluice", "serve", "--help")
	cmd.Dir = repoRoot(t)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice serve --help: %v", err)
	}
	known := map[string]bool{"SLUICE_BOOTSTRAP_USER": true}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(out.String(), -1) {
		known["SLUICE_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))] = true
	}
	if !known["SLUICE_LISTENERS"] || !known["SLUICE_TLS_CLIENT_CA"] {
		t.Fatalf("could not read serve's flags from its help:\n%s", out.String())
	}
	return known
}
