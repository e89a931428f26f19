package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// apiServer is one etcd and one kube-apiserver on 127.0.0.1, with a static
// admin token and a kubeconfig for the watchers (the serving certificate is
// the API server's self-signed one; the kubeconfig skips its check).
type apiServer struct {
	etcd, apiserver *proc
	apiBin, dir     string
	apiArgs         []string // to start kube-apiserver again (restart)
	kubeconfig      string
	admin           kubernetes.Interface
	restConfig      *rest.Config
}

// extra are more kube-apiserver flags, kept for a restart.
func startAPIServer(ctx context.Context, binDir, dir string, extra ...string) (*apiServer, error) {
	s := &apiServer{}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL, peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.etcd, err = startProc("etcd", dir, filepath.Join(binDir, "etcd"),
		"--name=churn", "--data-dir="+filepath.Join(dir, "etcd-data"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=churn="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	token, saKey, err := secrets(dir)
	if err != nil {
		s.stop()
		return nil, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",churn-admin,churn-admin,\"system:masters\"\n"), 0o600); err != nil {
		s.stop()
		return nil, fmt.Errorf("writing token file: %w", err)
	}
	s.apiBin, s.dir = filepath.Join(binDir, "kube-apiserver"), dir
	s.apiArgs = []string{"--etcd-servers=" + etcdURL, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(dir, "certs"), "--token-auth-file=" + tokens,
		"--authorization-mode=RBAC", "--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
		"--disable-admission-plugins=ServiceAccount", "--profiling=false", "--v=0"}
	s.apiArgs = append(s.apiArgs, extra...)
	if s.apiserver, err = startProc("kube-apiserver", dir, s.apiBin, s.apiArgs...); err != nil {
		s.stop()
		return nil, err
	}
	s.kubeconfig = filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: churn
  cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}
users:
- name: churn
  user: {token: %q}
contexts:
- name: churn
  context: {cluster: churn, user: churn}
current-context: churn
`, ports[2], token)
	if err := os.WriteFile(s.kubeconfig, []byte(kc), 0o600); err != nil {
		s.stop()
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	if s.restConfig, err = clientcmd.BuildConfigFromFlags("", s.kubeconfig); err != nil {
		s.stop()
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	s.restConfig.QPS, s.restConfig.Burst = 500, 1000
	s.restConfig.ContentType = "application/vnd.kubernetes.protobuf"
	if s.admin, err = kubernetes.NewForConfig(s.restConfig); err != nil {
		s.stop()
		return nil, fmt.Errorf("building admin client: %w", err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady waits until the API server takes writes and its default
// ServiceCIDR is ready to hand out ClusterIPs (90 s at most).
func (s *apiServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		_, err := s.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "churn"}},
			metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			var cidr *networkingv1.ServiceCIDR
			cidr, err = s.admin.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
			if err == nil && meta.IsStatusConditionTrue(cidr.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
				return nil
			}
			if err == nil {
				err = errors.New("default ServiceCIDR not ready")
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for kube-apiserver: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// restart stops kube-apiserver (SIGTERM) and starts it again on the same
// port and etcd, then waits until it takes writes.
func (s *apiServer) restart(ctx context.Context) error {
	s.apiserver.stop()
	p, err := startProc("kube-apiserver-restarted", s.dir, s.apiBin, s.apiArgs...)
	if err != nil {
		return err
	}
	s.apiserver = p
	return s.waitReady(ctx)
}

func (s *apiServer) stop() {
	for _, p := range []*proc{s.apiserver, s.etcd} {
		if p != nil {
			p.stop()
		}
	}
}

// secrets writes a service-account signing key and returns an admin token
// and the key's path.
func secrets(dir string) (token, keyPath string, err error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("making token: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating service account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encoding service account key: %w", err)
	}
	keyPath = filepath.Join(dir, "sa.key")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing service account key: %w", err)
	}
	return hex.EncodeToString(b), keyPath, nil
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 when asked.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close() // only held to keep the ports distinct
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
