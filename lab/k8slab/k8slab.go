// Package k8slab runs a real etcd and kube-apiserver on 127.0.0.1 for tests:
// free ports, a temp dir, token auth, RBAC, a dual-stack service range, and
// edgelb's CRDs installed. The binaries are built once per machine into
// $EDGELB_CACHE/bin by lab/tools/build.sh (`make test-k8s` does it); when they
// are missing the test is skipped with a message saying how to build them.
//
// Shutdown order matters: kube-apiserver is stopped before etcd, otherwise its
// shutdown hangs for minutes retrying etcd.
package k8slab

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/ports"
	"github.com/edgelb/edgelb/lb/k8s/crds"
)

// AdminToken is the bearer token of the lab's system:masters user.
const AdminToken = "edgelb-lab-admin"

// Users are plain users (no groups, so only what RBAC grants them) the lab
// knows; UserConfig returns a rest.Config acting as one of them.
var Users = []string{"edgelb", "nobody"}

// Lab is one running etcd + kube-apiserver pair.
type Lab struct {
	Dir        string       // temp dir holding data, certs, logs and the kubeconfig
	Config     *rest.Config // admin, QPS raised for tests
	Kubeconfig string       // path of a kubeconfig file for the admin user
	Host       string       // https://127.0.0.1:PORT

	mu       sync.Mutex
	etcd     *proc
	api      *proc
	etcdURL  string
	apiPort  int
	apiStart int // how many times the apiserver was started (log file suffix)
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File
}

// CacheDir is where the lab binaries live ($EDGELB_CACHE, default /var/cache/edgelb).
func CacheDir() string {
	if d := os.Getenv("EDGELB_CACHE"); d != "" {
		return d
	}
	return "/var/cache/edgelb"
}

// Binary returns the path of a lab binary and whether it is present.
func Binary(name string) (string, bool) {
	p := filepath.Join(CacheDir(), "bin", name)
	st, err := os.Stat(p)
	return p, err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Start brings up etcd and kube-apiserver, installs edgelb's CRDs and
// registers cleanup (apiserver first, then etcd). It skips the test when the
// binaries are missing.
func Start(t testing.TB) *Lab {
	t.Helper()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, ok := Binary(b); !ok {
			t.Skipf("k8slab: %s not found in %s/bin: build it with lab/tools/build.sh (make test-k8s does)", b, CacheDir())
		}
	}
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatalf("k8slab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Logf("k8slab: stop: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, l.Config, crds.All()...); err != nil {
		t.Fatalf("k8slab: %v", err)
	}
	return l
}

// New starts etcd and kube-apiserver with their state in dir. Call Stop.
func New(dir string) (*Lab, error) {
	l := &Lab{Dir: dir}
	if err := l.writeKeys(); err != nil {
		return nil, err
	}
	if err := l.startEtcd(); err != nil {
		_ = l.Stop()
		return nil, err
	}
	port, err := ports.Free()
	if err != nil {
		_ = l.Stop()
		return nil, err
	}
	l.apiPort = port
	l.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	if err := l.StartAPIServer(); err != nil {
		_ = l.Stop()
		return nil, err
	}
	l.Config = &rest.Config{
		Host:            l.Host,
		BearerToken:     AdminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             2000,
		Burst:           4000,
	}
	if err := l.writeKubeconfig(); err != nil {
		_ = l.Stop()
		return nil, err
	}
	return l, nil
}

func (l *Lab) writeKeys() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service account public key: %w", err)
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(tokens()),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(l.Dir, name), b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return os.MkdirAll(filepath.Join(l.Dir, "certs"), 0o700)
}

func tokens() string {
	out := AdminToken + ",edgelb-admin,edgelb-admin-uid,system:masters\n"
	for _, u := range Users {
		out += userToken(u) + "," + u + "," + u + "-uid\n"
	}
	return out
}

func userToken(user string) string { return "edgelb-lab-user-" + user }

// UserConfig returns a client config authenticating as one of Users.
func (l *Lab) UserConfig(user string) *rest.Config {
	c := rest.CopyConfig(l.Config)
	c.BearerToken = userToken(user)
	return c
}

func (l *Lab) startEtcd() error {
	bin, _ := Binary("etcd")
	cport, err := ports.Free()
	if err != nil {
		return err
	}
	pport, err := ports.Free()
	if err != nil {
		return err
	}
	l.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", cport)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	p, err := startProc(filepath.Join(l.Dir, "etcd.log"), bin,
		"--name", "lab", "--data-dir", filepath.Join(l.Dir, "etcd-data"),
		"--listen-client-urls", l.etcdURL, "--advertise-client-urls", l.etcdURL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "lab="+peer,
		// Tests write a lot and keep nothing: no need for fsync latency to dominate.
		"--unsafe-no-fsync", "--quota-backend-bytes", strconv.Itoa(2<<30))
	if err != nil {
		return err
	}
	l.etcd = p
	c := &http.Client{Timeout: time.Second}
	return waitFor(30*time.Second, p, func() bool {
		resp, err := c.Get(l.etcdURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, "etcd /health")
}

// StartAPIServer starts kube-apiserver (again) on the lab's port and waits
// for /readyz. Clients built from Config keep working across restarts.
func (l *Lab) StartAPIServer() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.api != nil {
		return errors.New("kube-apiserver already running")
	}
	bin, _ := Binary("kube-apiserver")
	l.apiStart++
	d := l.Dir
	p, err := startProc(filepath.Join(d, fmt.Sprintf("apiserver-%d.log", l.apiStart)), bin,
		"--etcd-servers="+l.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(l.apiPort),
		"--cert-dir="+filepath.Join(d, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(d, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(d, "sa.key"),
		// Dual-stack so Services may ask for IPv6 and both families.
		"--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/112",
		"--token-auth-file="+filepath.Join(d, "tokens.csv"),
		"--authorization-mode=RBAC",
		// Without it the apiserver exits when advertising 127.0.0.1.
		"--endpoint-reconciler-type=none")
	if err != nil {
		return err
	}
	l.api = p
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return waitFor(90*time.Second, p, func() bool {
		req, _ := http.NewRequest("GET", l.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+AdminToken)
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode == 200 && b.String() == "ok"
	}, "kube-apiserver /readyz")
}

// StopAPIServer stops kube-apiserver (SIGTERM; SIGKILL when it still waits
// on open watches after a grace period), leaving etcd and the data up.
func (l *Lab) StopAPIServer() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.api
	l.api = nil
	_ = p.stop(10 * time.Second) // killed after the grace: fine for a lab
	return nil
}

// KillAPIServer kills kube-apiserver with SIGKILL at once (a crash; what
// "the API server is gone" looks like to clients), leaving etcd up.
func (l *Lab) KillAPIServer() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.api
	l.api = nil
	return p.stop(0)
}

// RestartAPIServer stops kube-apiserver, waits down, then starts it again.
func (l *Lab) RestartAPIServer(down time.Duration) error {
	if err := l.StopAPIServer(); err != nil {
		return err
	}
	time.Sleep(down)
	return l.StartAPIServer()
}

// Stop stops kube-apiserver, then etcd. Safe to call twice.
func (l *Lab) Stop() error {
	err := l.StopAPIServer()
	l.mu.Lock()
	p := l.etcd
	l.etcd = nil
	l.mu.Unlock()
	return errors.Join(err, p.stop(20*time.Second))
}

// APIServerLog returns the path of the current kube-apiserver log.
func (l *Lab) APIServerLog() string {
	return filepath.Join(l.Dir, fmt.Sprintf("apiserver-%d.log", l.apiStart))
}

// Clientset returns a typed client for the admin user.
func (l *Lab) Clientset() kubernetes.Interface { return kubernetes.NewForConfigOrDie(l.Config) }

// Dynamic returns a dynamic client for the admin user.
func (l *Lab) Dynamic() dynamic.Interface { return dynamic.NewForConfigOrDie(l.Config) }

func (l *Lab) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = &clientcmdapi.Cluster{Server: l.Host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: AdminToken}
	cfg.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "lab"
	l.Kubeconfig = filepath.Join(l.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, l.Kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// Apply creates every object of a multi-document YAML (kinds resolved
// through discovery), updating those that exist.
func Apply(ctx context.Context, cfg *rest.Config, doc []byte) error {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, part := range bytes.Split(doc, []byte("\n---")) {
		var m map[string]any
		if err := yaml.Unmarshal(part, &m); err != nil {
			return fmt.Errorf("parse: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		gvk := u.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("map %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = dc.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dc.Resource(mapping.Resource).Namespace(u.GetNamespace())
		}
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err == nil {
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
		} else {
			_, err = ri.Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
	return nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates (or updates) each CRD from YAML and waits until the
// apiserver reports it Established and serves it.
func InstallCRDs(ctx context.Context, cfg *rest.Config, docs ...[]byte) error {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return fmt.Errorf("parse CRD: %w", err)
		}
		u := &unstructured.Unstructured{Object: m}
		cur, err := dc.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err == nil {
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = dc.Resource(crdGVR).Update(ctx, u, metav1.UpdateOptions{})
		} else {
			_, err = dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", u.GetName(), err)
		}
		if err := waitEstablished(ctx, dc, u.GetName()); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, dc dynamic.Interface, name string) error {
	for {
		cur, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			for _, c := range conds {
				cm, _ := c.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func startProc(logPath, bin string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Die with the test binary even when it is killed before cleanup runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: f}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace (at once when grace is 0).
// A nil proc is a no-op.
func (p *proc) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if grace > 0 {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	if grace == 0 {
		return nil
	}
	return fmt.Errorf("%s did not stop within %s: killed", filepath.Base(p.cmd.Path), grace)
}

func waitFor(limit time.Duration, p *proc, ok func() bool, what string) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			// The log lives in the test's temp dir, gone after the run:
			// quote its end, where the process said why.
			return fmt.Errorf("%s: process exited (%v); the end of %s:\n%s", what, p.err, p.log.Name(), logbuf.FileTail(p.log.Name(), 20))
		default:
		}
		if ok() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: not ready after %s; the end of %s:\n%s", what, limit, p.log.Name(), logbuf.FileTail(p.log.Name(), 20))
}
