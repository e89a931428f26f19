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

// suiteEnv is what TestMain sets up once for every test of the binary.
// It is written only by TestMain, before any test runs.
type suiteEnv struct {
	api   *apiServer    // nil when unavailable; see skipReason
	agent agentIdentity // the ServiceAccount of deploy/base/rbac.yaml
	// podAgent is another ServiceAccount with the roles of deploy/base and
	// deploy/overlays/pod-access (list and watch of pods).
	podAgent agentIdentity
	workDir  string // removed after the tests
	// skipReason says why the suite cannot run here; empty when it can.
	skipReason string
}

var env suiteEnv

func TestMain(m *testing.M) {
	if _, child := ifaceChildMode(); child {
		// A TestIfaceLibrary* child inside the namespace its parent made: it
		// drives pkg/iface alone and must not start an apiserver there.
		os.Exit(m.Run())
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nodecache-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: creating work dir: %v\n", err)
		return 1
	}
	env.workDir = dir
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := setUp(dir); err != nil {
		env.skipReason = err.Error()
		fmt.Fprintf(os.Stderr, "\n*** e2e: SUITE CANNOT RUN: %s ***\n\n", env.skipReason)
	}
	code := m.Run()
	stopSharedRealNode()
	if env.api != nil {
		if err := env.api.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			code = 1
		}
	}
	if code != 0 && env.api != nil {
		keep = true
		fmt.Fprintf(os.Stderr, "e2e: failed; apiserver and etcd logs kept in %s\n", dir)
	}
	return code
}

// setUp checks the prerequisites and starts the apiserver.
func setUp(dir string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root (uid %d): network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN", os.Geteuid())
	}
	binDir, err := apiServerBinDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api, err := startAPIServer(ctx, binDir, dir)
	if err != nil {
		return fmt.Errorf("starting the apiserver: %w", err)
	}
	env.api = api
	fmt.Fprintf(os.Stderr, "e2e: etcd + kube-apiserver ready at %s in %v\n", api.URL, api.StartUp.Round(time.Millisecond))
	if err := dummySupported(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: kernel has no dummy links (%v): the agent falls back to a bridge\n", err)
	}
	if env.agent, err = applyRBACManifest(ctx, api.Admin, "", rbacManifest); err != nil {
		return fmt.Errorf("applying %s: %w", rbacManifest, err)
	}
	if env.podAgent, err = applyRBACManifest(ctx, api.Admin, podAccessSuffix, rbacManifest, podAccessManifest); err != nil {
		return fmt.Errorf("applying %s and %s: %w", rbacManifest, podAccessManifest, err)
	}
	return nil
}

// requireSuite skips t (or fails it under CI=true) when the suite cannot run
// here. Every test calls it first.
func requireSuite(t testing.TB) {
	t.Helper()
	if env.skipReason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("e2e suite cannot run and CI=true forbids skipping: %s", env.skipReason)
	}
	t.Skipf("SKIPPING e2e (set CI=true to make this a failure): %s", env.skipReason)
}

// rbacManifest is the agent's identity as shipped, relative to this package;
// podAccessManifest the pod-access overlay's extra roles for it.
const (
	rbacManifest      = "../deploy/base/rbac.yaml"
	podAccessManifest = "../deploy/overlays/pod-access/rbac.yaml"
	// podAccessSuffix names the pod-access identity's objects apart from
	// the base's, so that both grants exist in the one test cluster.
	podAccessSuffix = "-pod-access"
)

// agentIdentity is the ServiceAccount from rbacManifest, created in the
// cluster together with its ClusterRole and binding.
type agentIdentity struct {
	Namespace, Name string
}

// applyRBACManifest decodes every document of paths and creates it as
// admin, each name (and every reference to one) given suffix. Only the
// kinds an identity manifest holds are accepted, so a manifest gaining
// something else is noticed here.
func applyRBACManifest(ctx context.Context, c kubernetes.Interface, suffix string, paths ...string) (agentIdentity, error) {
	var id agentIdentity
	for _, path := range paths {
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
			renameRBAC(obj, suffix)
			if err := createManifestObject(ctx, c, obj, &id); err != nil {
				return id, fmt.Errorf("creating document %d of %s: %w", i, path, err)
			}
		}
	}
	if id.Name == "" {
		return id, fmt.Errorf("%v hold no ServiceAccount", paths)
	}
	return id, nil
}

// renameRBAC appends suffix to the name of obj, its role reference and
// its subjects.
func renameRBAC(obj runtime.Object, suffix string) {
	subjects := func(ss []rbacv1.Subject) {
		for i := range ss {
			ss[i].Name += suffix
		}
	}
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		o.Name += suffix
	case *rbacv1.ClusterRole:
		o.Name += suffix
	case *rbacv1.Role:
		o.Name += suffix
	case *rbacv1.ClusterRoleBinding:
		o.Name += suffix
		o.RoleRef.Name += suffix
		subjects(o.Subjects)
	case *rbacv1.RoleBinding:
		o.Name += suffix
		o.RoleRef.Name += suffix
		subjects(o.Subjects)
	}
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

// agentKubeconfig writes a kubeconfig with the token of id (env.agent or
// env.podAgent) for server (the apiserver itself or a forwarder to it) into
// a temp dir.
func agentKubeconfig(t testing.TB, id agentIdentity, server string) string {
	t.Helper()
	tok := agentToken(t, id)
	path := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if err := writeKubeconfig(path, server, env.api.PKI.caPEM, tok); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentClient is a clientset with the identity id, straight to the
// apiserver.
func agentClient(t testing.TB, id agentIdentity) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.api.restConfig(agentToken(t, id)))
	if err != nil {
		t.Fatalf("agent client: %v", err)
	}
	return c
}

// agentToken is a fresh one-hour token of the identity id.
func agentToken(t testing.TB, id agentIdentity) string {
	t.Helper()
	tok, err := id.token(apiCtx(t), env.api.Admin, time.Hour)
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	return tok
}
