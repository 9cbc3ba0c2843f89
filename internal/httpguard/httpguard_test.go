package httpguard

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })

func writeToken(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dtakit test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

func serve(t *testing.T, s *Server) {
	t.Helper()
	go s.Serve()
	t.Cleanup(func() { s.Shutdown(t.Context()) })
}

func get(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBearerToken(t *testing.T) {
	const token = "0123456789abcdef-secret"
	s, err := Listen("127.0.0.1:0", Config{TokenFile: writeToken(t, token+"\n")}, ok)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s)
	base := "http://" + s.Addr().String()
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/v1/x", "", http.StatusUnauthorized},
		{"/v1/x", "wrong-token-of-some-length", http.StatusUnauthorized},
		{"/v1/x", token[:len(token)-1], http.StatusUnauthorized},
		{"/metrics", "", http.StatusUnauthorized},
		{"/v1/x", token, http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		if got := get(t, http.DefaultClient, base+c.path, c.token); got != c.want {
			t.Errorf("GET %s with token %q: %d, want %d", c.path, c.token, got, c.want)
		}
	}
	if _, err := Listen("127.0.0.1:0", Config{TokenFile: writeToken(t, "short")}, ok); !errors.Is(err, ErrConfig) {
		t.Errorf("a 5-byte token: %v, want ErrConfig", err)
	}
}

func TestExposed(t *testing.T) {
	cert, key, pool := writeCert(t)
	token := writeToken(t, "0123456789abcdef-secret")
	for _, c := range []struct {
		name string
		addr string
		cfg  Config
		want error
	}{
		{"loopback", "127.0.0.1:0", Config{}, nil},
		{"wildcard", "0.0.0.0:0", Config{}, ErrExposed},
		{"empty host", ":0", Config{}, ErrExposed},
		{"wildcard, token only", "0.0.0.0:0", Config{TokenFile: token}, ErrExposed},
		{"wildcard, TLS only", "0.0.0.0:0", Config{CertFile: cert, KeyFile: key}, ErrExposed},
		{"wildcard, token and TLS", "0.0.0.0:0", Config{TokenFile: token, CertFile: cert, KeyFile: key}, nil},
		{"wildcard, insecure", "0.0.0.0:0", Config{Insecure: true}, nil},
		{"half a pair", "127.0.0.1:0", Config{CertFile: cert}, ErrConfig},
	} {
		s, err := Listen(c.addr, c.cfg, ok)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if s != nil && s.Unguarded() != c.cfg.Insecure {
			t.Errorf("%s: Unguarded %v", c.name, s.Unguarded())
		}
		if s != nil {
			s.ln.Close()
		}
	}
	// TLS serves, and only TLS.
	s, err := Listen("127.0.0.1:0", Config{CertFile: cert, KeyFile: key}, ok)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s)
	tc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if got := get(t, tc, "https://"+s.Addr().String()+"/v1/x", ""); got != http.StatusOK {
		t.Errorf("over TLS: %d", got)
	}
	if got := get(t, http.DefaultClient, "http://"+s.Addr().String()+"/v1/x", ""); got != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS server: %d, want 400", got)
	}
}
