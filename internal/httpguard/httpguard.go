// Package httpguard serves a daemon's HTTP API the way every dtakit daemon
// does: on loopback by default; beyond loopback only with a bearer token
// and TLS, unless told explicitly to serve without (Config.Insecure);
// with server timeouts and a header size bound. Configuration follows what
// Prometheus's exporter-toolkit web configuration names: a certificate and
// key file pair for TLS (TLS 1.2 at least), a secret checked on every
// request.
package httpguard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Errors of Listen.
var (
	// ErrConfig: the token or certificate files cannot be used.
	ErrConfig = errors.New("httpguard: bad configuration")
	// ErrExposed: the address is beyond loopback and neither a token and
	// TLS nor Insecure are configured.
	ErrExposed = errors.New("httpguard: address beyond loopback needs a bearer token and TLS (http_token_file, http_cert_file and http_key_file), or http_insecure to serve it unprotected")
)

// Config is the HTTP part of a daemon's configuration, in its JSON file
// (embedded) or from its flags (Flags).
type Config struct {
	// TokenFile holds the bearer token every request but GET /healthz
	// must carry ("Authorization: Bearer <token>"); its surrounding white
	// space is ignored, and it must be at least MinTokenLen bytes.
	TokenFile string `json:"http_token_file"`
	// CertFile and KeyFile are a PEM certificate (chain) and its key: the
	// API is then served over TLS only.
	CertFile string `json:"http_cert_file"`
	KeyFile  string `json:"http_key_file"`
	// Insecure lets the API listen beyond loopback without a token or
	// without TLS.
	Insecure bool `json:"http_insecure"`
}

// MinTokenLen is the shortest bearer token accepted.
const MinTokenLen = 16

// Server timeouts: a client that sends its request slowly, or reads its
// answer slowly, holds a connection this long at most.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 2 * time.Minute
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 16 << 10
)

// Flags registers -http-token-file, -http-cert, -http-key and
// -http-insecure on fs; the function returned, called after fs.Parse,
// sets in c the ones given (flags override the file).
func (c *Config) Flags(fs *flag.FlagSet) func() {
	token := fs.String("http-token-file", "", "file holding the bearer token HTTP requests must carry (all but /healthz)")
	cert := fs.String("http-cert", "", "PEM certificate file: serve HTTP over TLS (with -http-key)")
	key := fs.String("http-key", "", "PEM key file of -http-cert")
	insecure := fs.Bool("http-insecure", false, "allow an HTTP address beyond loopback without a token or TLS")
	return func() {
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "http-token-file":
				c.TokenFile = *token
			case "http-cert":
				c.CertFile = *cert
			case "http-key":
				c.KeyFile = *key
			case "http-insecure":
				c.Insecure = *insecure
			}
		})
	}
}

// Server is a daemon's HTTP server, bound.
type Server struct {
	srv       *http.Server
	ln        net.Listener
	tls       bool
	unguarded bool // beyond loopback without a token or TLS (Insecure)
}

// Listen checks c, binds addr and returns the server of h, not yet
// serving. An address beyond loopback (a wildcard included) needs a token
// and TLS, or Insecure: ErrExposed otherwise.
func Listen(addr string, c Config, h http.Handler) (*Server, error) {
	var token []byte
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("%w: token: %w", ErrConfig, err)
		}
		token = []byte(strings.TrimSpace(string(b)))
		if len(token) < MinTokenLen {
			return nil, fmt.Errorf("%w: token in %s: %d bytes, want at least %d", ErrConfig, c.TokenFile, len(token), MinTokenLen)
		}
	}
	var tcfg *tls.Config
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %q and key %q: %w", ErrConfig, c.CertFile, c.KeyFile, err)
		}
		tcfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpguard: %w", err)
	}
	// The bound address decides: a host name, an empty host or a wildcard
	// resolves to what the listener holds.
	unguarded := false
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		unguarded = token == nil || tcfg == nil
		if unguarded && !c.Insecure {
			ln.Close()
			return nil, fmt.Errorf("%w: %s binds %v", ErrExposed, addr, ln.Addr())
		}
	}
	if token != nil {
		h = bearer(token, h)
	}
	s := &Server{ln: ln, tls: tcfg != nil, unguarded: unguarded, srv: &http.Server{
		Handler:           h,
		TLSConfig:         tcfg,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}}
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Unguarded reports whether the server listens beyond loopback without a
// token or without TLS, as Config.Insecure allowed: a daemon says so in
// its log.
func (s *Server) Unguarded() bool { return s.unguarded }

// TLS reports whether the server serves TLS.
func (s *Server) TLS() bool { return s.tls }

// Serve serves until Shutdown; it then returns http.ErrServerClosed.
func (s *Server) Serve() error {
	if s.tls {
		return s.srv.ServeTLS(s.ln, "", "")
	}
	return s.srv.Serve(s.ln)
}

// Shutdown stops the server, waiting for the requests under way until ctx
// is done.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// bearer refuses every request but GET /healthz (a liveness probe, which
// reveals nothing) that does not carry token, with 401. The comparison
// takes the same time whatever the token sent.
func bearer(token []byte, h http.Handler) http.Handler {
	want := sha256.Sum256(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="dtakit"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"error":"missing or wrong bearer token (Authorization: Bearer <token>)"}` + "\n"))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
