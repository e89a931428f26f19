//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// rbacManifest is the agent's identity as shipped, relative to this package.
const rbacManifest = "../deploy/base/rbac.yaml"

// agentIdentity is the ServiceAccount from rbacManifest, created in the
// cluster together with its ClusterRole and binding.
type agentIdentity struct {
	Namespace, Name string
}

// applyRBACManifest decodes every document of path and creates it as admin.
// Only the kinds an identity manifest holds are accepted, so a manifest
// gaining something else is noticed here.
func applyRBACManifest(ctx context.Context, c kubernetes.Interface, path string) (agentIdentity, error) {
	var id agentIdentity
	raw, err := os.ReadFile(path)
	if err != nil {
		return id, fmt.Errorf("reading %s: %w", path, err)
	}
	for i, doc := range bytes.Split(raw, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return id, fmt.Errorf("decoding document %d of %s: %w", i, path, err)
		}
		if err := createManifestObject(ctx, c, obj, &id); err != nil {
			return id, fmt.Errorf("creating document %d of %s: %w", i, path, err)
		}
	}
	if id.Name == "" {
		return id, fmt.Errorf("%s holds no ServiceAccount", path)
	}
	return id, nil
}

func createManifestObject(ctx context.Context, c kubernetes.Interface, obj runtime.Object, id *agentIdentity) error {
	opts := metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		if err = ensureNamespace(ctx, c, o.Namespace); err != nil {
			return err
		}
		_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		id.Namespace, id.Name = o.Namespace, o.Name
	case *rbacv1.ClusterRole:
		_, err = c.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	default:
		return fmt.Errorf("unexpected kind %T in the RBAC manifest", obj)
	}
	if err != nil {
		return fmt.Errorf("creating %T: %w", obj, err)
	}
	return nil
}

// token asks the TokenRequest API for a token of the identity, as the kubelet
// does for a projected ServiceAccount token.
func (id agentIdentity) token(ctx context.Context, c kubernetes.Interface, ttl time.Duration) (string, error) {
	secs := int64(ttl / time.Second)
	tr, err := c.CoreV1().ServiceAccounts(id.Namespace).CreateToken(ctx, id.Name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", id.Namespace, id.Name, err)
	}
	return tr.Status.Token, nil
}

// writeKubeconfig writes a kubeconfig for server that trusts caPEM and
// authenticates with token.
func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// agentKubeconfig writes a kubeconfig with the agent identity's token for
// server (the apiserver itself or a forwarder to it) into a temp dir.
func agentKubeconfig(t testing.TB, server string) string {
	t.Helper()
	tok := agentToken(t)
	path := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if err := writeKubeconfig(path, server, env.api.PKI.caPEM, tok); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentClient is a clientset with the agent's identity, straight to the
// apiserver.
func agentClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.api.restConfig(agentToken(t)))
	if err != nil {
		t.Fatalf("agent client: %v", err)
	}
	return c
}

// agentToken is a fresh one-hour token of the agent identity.
func agentToken(t testing.TB) string {
	t.Helper()
	tok, err := env.agent.token(apiCtx(t), env.api.Admin, time.Hour)
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	return tok
}
