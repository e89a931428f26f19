//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Service CIDRs of the test cluster: dual-stack, IPv4 primary.
const serviceCIDRs = "10.96.0.0/16,fd00:10:96::/112"

// apiServer is one etcd plus one kube-apiserver on 127.0.0.1 of the host
// network namespace.
type apiServer struct {
	Port            int    // secure port on 127.0.0.1
	URL             string // https://127.0.0.1:Port
	PKI             *pki
	AdminToken      string // member of system:masters
	AdminKubeconfig string
	Admin           kubernetes.Interface // always non-nil after start
	StartUp         time.Duration        // from exec of etcd to ready RBAC

	dir       string
	cfg       apiConfig
	etcdURL   string
	etcd      *proc
	apiserver *proc
}

// apiServerBinDir finds etcd and kube-apiserver: $NODECACHE_E2E_BIN, else the
// cache directory that e2e/tools/build-k8s.sh fills.
func apiServerBinDir() (string, error) {
	dir := os.Getenv("NODECACHE_E2E_BIN")
	if dir == "" {
		cache := os.Getenv("NODECACHE_E2E_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("finding home directory: %w", err)
			}
			cache = filepath.Join(home, ".cache", "nodecache-e2e")
		}
		k8s, etcd := envOr("K8S_VERSION", "v1.35.4"), envOr("ETCD_VERSION", "v3.7.3")
		dir = filepath.Join(cache, "bin", "k8s-"+k8s+"-etcd-"+etcd)
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s missing (run e2e/tools/build-k8s.sh or set NODECACHE_E2E_BIN): %w", b, err)
		}
	}
	return dir, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// startAPIServer starts etcd and kube-apiserver in dir and waits until the
// apiserver is ready and its RBAC bootstrap is done.
func startAPIServer(ctx context.Context, binDir, dir string) (*apiServer, error) {
	return startAPIServerWith(ctx, binDir, dir, apiConfig{})
}

// apiConfig is what a cluster with nodes needs beyond the zone tests' bare
// API server.
type apiConfig struct {
	// ServiceAccounts turns the ServiceAccount admission plugin on: pods
	// get tokens. It needs a controller-manager to create the default
	// ServiceAccount of each namespace.
	ServiceAccounts bool
	// Tokens are extra lines of the static token file (token,user,uid,"groups").
	Tokens []string
	// Kubelets lets the API server reach kubelets by their InternalIP
	// with a client certificate (PKI.kubeletClientCert) that a kubelet
	// trusting the CA accepts: logs, exec, port-forward.
	Kubelets bool
	// AdvertiseAddress, when set, is the address the API server puts in
	// the default/kubernetes EndpointSlice (with its secure port), kept
	// there by the lease reconciler, as on a real cluster. The API server
	// still listens on 127.0.0.1 only: whoever sets it forwards that
	// address and port to it.
	AdvertiseAddress string
}

func startAPIServerWith(ctx context.Context, binDir, dir string, cfg apiConfig) (*apiServer, error) {
	start := time.Now()
	s := &apiServer{dir: dir, cfg: cfg, AdminToken: "nodecache-e2e-admin-" + strconv.FormatInt(start.UnixNano(), 36)}
	var err error
	if s.PKI, err = newPKI(dir); err != nil {
		return nil, err
	}
	if err := s.startEtcd(ctx, binDir); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.startKubeAPIServer(ctx, binDir); err != nil {
		s.Stop()
		return nil, err
	}
	s.StartUp = time.Since(start)
	return s, nil
}

func (s *apiServer) startEtcd(ctx context.Context, binDir string) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	cURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	pURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	s.etcd, err = startProc("etcd", filepath.Join(s.dir, "etcd.log"), filepath.Join(binDir, "etcd"),
		"--name=e2e", "--data-dir="+filepath.Join(s.dir, "etcd-data"),
		"--listen-client-urls="+cURL, "--advertise-client-urls="+cURL,
		"--listen-peer-urls="+pURL, "--initial-advertise-peer-urls="+pURL,
		"--initial-cluster=e2e="+pURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = poll(wctx, 100*time.Millisecond, s.etcd, func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, cURL+"/health", "")
	})
	if err != nil {
		return fmt.Errorf("waiting for etcd: %w\n%s", err, s.etcd.logTail(4000))
	}
	s.etcdURL = cURL
	return nil
}

func (s *apiServer) startKubeAPIServer(ctx context.Context, binDir string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Port = port
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	tokens := filepath.Join(s.dir, "tokens.csv")
	line := fmt.Sprintf("%s,nodecache-e2e-admin,nodecache-e2e-admin,\"system:masters\"\n", s.AdminToken)
	for _, l := range s.cfg.Tokens {
		line += l + "\n"
	}
	if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	args := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(s.dir, "certs"),
		"--tls-cert-file=" + s.PKI.serverCert, "--tls-private-key-file=" + s.PKI.serverKey,
		"--client-ca-file=" + s.PKI.caCert,
		"--token-auth-file=" + tokens,
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + serviceCIDRs,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.PKI.saPub,
		"--service-account-signing-key-file=" + s.PKI.saKey,
		"--profiling=false", "--v=1",
	}
	if s.cfg.AdvertiseAddress != "" {
		args = append(args, "--advertise-address="+s.cfg.AdvertiseAddress)
	} else {
		// A loopback advertise address is refused unless nothing
		// reconciles the kubernetes endpoints.
		args = append(args, "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
	}
	if s.cfg.Kubelets {
		// Privileged pods allowed, as kubeadm's API server does:
		// `kubectl debug node --profile=sysadmin` makes one.
		args = append(args, "--allow-privileged=true", "--kubelet-preferred-address-types=InternalIP",
			"--kubelet-client-certificate="+s.PKI.kubeletClientCert, "--kubelet-client-key="+s.PKI.kubeletClientKey)
	}
	if !s.cfg.ServiceAccounts {
		// No controller-manager: nothing would create the ServiceAccount
		// the ServiceAccount admission plugin waits for.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	s.apiserver, err = startProc("kube-apiserver", filepath.Join(s.dir, "kube-apiserver.log"),
		append([]string{filepath.Join(binDir, "kube-apiserver")}, args...)...)
	if err != nil {
		return err
	}
	if s.Admin, err = kubernetes.NewForConfig(s.restConfig(s.AdminToken)); err != nil {
		return fmt.Errorf("building admin client: %w", err)
	}
	hc, err := s.httpClient()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err = poll(wctx, 200*time.Millisecond, s.apiserver, func(ctx context.Context) error {
		if err := httpOK(ctx, hc, s.URL+"/readyz", s.AdminToken); err != nil {
			return err
		}
		return ensureNamespace(ctx, s.Admin, "kube-system")
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-apiserver: %w\n%s", err, s.apiserver.logTail(8000))
	}
	s.AdminKubeconfig = filepath.Join(s.dir, "admin.kubeconfig")
	return writeKubeconfig(s.AdminKubeconfig, s.URL, s.PKI.caPEM, s.AdminToken)
}

// restConfig is a client configuration for s authenticating with token.
func (s *apiServer) restConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.PKI.caPEM},
		QPS:             200,
		Burst:           400,
		Timeout:         30 * time.Second,
	}
}

func (s *apiServer) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.PKI.caPEM) {
		return nil, fmt.Errorf("loading CA certificate")
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

// Stop stops the apiserver, then etcd. It is idempotent.
func (s *apiServer) Stop() error {
	var errs []string
	for _, p := range []*proc{s.apiserver, s.etcd} {
		if p == nil {
			continue
		}
		if err := p.Stop(20 * time.Second); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping apiserver: %s", strings.Join(errs, "; "))
	}
	return nil
}

// httpOK GETs url and wants 200.
func httpOK(ctx context.Context, hc *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building request for %s: %w", url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("getting %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("getting %s: got status %d (%s), want 200", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// ensureNamespace creates namespace name unless it exists.
func ensureNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// pki is the set of files the apiserver and its clients need. Every path is
// absolute and lives in one private directory.
type pki struct {
	caCert     string // PEM, the CA that signed serverCert; clients trust it
	serverCert string // PEM, SANs: 127.0.0.1 and the in-cluster names
	serverKey  string
	saKey      string // PEM private key signing ServiceAccount tokens
	saPub      string // PEM public key verifying them
	caPEM      []byte // contents of caCert, for kubeconfigs
	// The API server's client certificate towards kubelets (CN
	// kube-apiserver-kubelet-client), signed by the CA.
	kubeletClientCert, kubeletClientKey string
}

// newPKI writes a fresh CA, an apiserver serving certificate and a
// ServiceAccount signing key pair into dir.
func newPKI(dir string) (*pki, error) {
	p := &pki{
		caCert:     filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "apiserver.crt"),
		serverKey:  filepath.Join(dir, "apiserver.key"),
		saKey:      filepath.Join(dir, "sa.key"),
		saPub:      filepath.Join(dir, "sa.pub"),

		kubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		kubeletClientKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodecache-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing serving certificate: %w", err)
	}
	kcKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating kubelet client key: %w", err)
	}
	kcDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &kcKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing kubelet client certificate: %w", err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating service account key: %w", err)
	}
	files := []struct {
		path  string
		block *pem.Block
	}{
		{path: p.caCert, block: &pem.Block{Type: "CERTIFICATE", Bytes: caDER}},
		{path: p.serverCert, block: &pem.Block{Type: "CERTIFICATE", Bytes: srvDER}},
		{path: p.serverKey, block: ecKeyBlock(srvKey)},
		{path: p.saKey, block: ecKeyBlock(saKey)},
		{path: p.saPub, block: pubKeyBlock(&saKey.PublicKey)},
		{path: p.kubeletClientCert, block: &pem.Block{Type: "CERTIFICATE", Bytes: kcDER}},
		{path: p.kubeletClientKey, block: ecKeyBlock(kcKey)},
	}
	for _, f := range files {
		if f.block == nil {
			return nil, fmt.Errorf("encoding %s", f.path)
		}
		if err := os.WriteFile(f.path, pem.EncodeToMemory(f.block), 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return p, nil
}

func ecKeyBlock(k *ecdsa.PrivateKey) *pem.Block {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil
	}
	return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
}

func pubKeyBlock(k *ecdsa.PublicKey) *pem.Block {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return nil
	}
	return &pem.Block{Type: "PUBLIC KEY", Bytes: der}
}
