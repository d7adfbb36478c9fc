// Transport security of the broker connection: TLS for an https:// BROKER_ADDR (with
// BROKER_CA_FILE roots and a WORKER_CERT_FILE/WORKER_KEY_FILE client certificate) and the
// WORKER_TOKEN / WORKER_TOKEN_FILE bearer token sent on every RPC. The files are read at
// every connect, so rotated ones are picked up without a restart.

package converge

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// useTLS reports whether the brokers are dialled over TLS (https:// addresses; validate
// refuses a list mixing TLS and plaintext).
func (c Config) useTLS() bool {
	return len(c.BrokerAddrs) > 0 && isTLSAddr(c.BrokerAddrs[0])
}

// checkTransport checks the token and TLS settings and reads their files once. Its errors
// name the environment variables (each field's doc says which) and never show the token.
func (c Config) checkTransport() error {
	if c.Token != "" && c.TokenFile != "" {
		return &ConfigError{Var: "WORKER_TOKEN", msg: "WORKER_TOKEN and WORKER_TOKEN_FILE are both set; set only one"}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		have, lack := "WORKER_CERT_FILE", "WORKER_KEY_FILE"
		if c.CertFile == "" {
			have, lack = lack, have
		}
		return &ConfigError{Var: lack, msg: fmt.Sprintf("%s is set but %s is not; a client certificate needs both", have, lack)}
	}
	if !c.useTLS() {
		for _, f := range []struct{ name, value string }{
			{"BROKER_CA_FILE", c.CAFile}, {"WORKER_CERT_FILE", c.CertFile}, {"WORKER_KEY_FILE", c.KeyFile},
		} {
			if f.value != "" {
				return &ConfigError{Var: f.name, msg: fmt.Sprintf(
					"%s is set but BROKER_ADDR=%q is plaintext; TLS files need BROKER_ADDR=https://host:port brokers",
					f.name, strings.Join(c.BrokerAddrs, ","))}
			}
		}
	}
	if _, err := c.readToken(); err != nil {
		return err
	}
	if c.useTLS() {
		for _, a := range c.BrokerAddrs {
			if _, err := c.tlsConfig(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// readToken is the bearer token: Token, or TokenFile read now ("" when neither is set).
func (c Config) readToken() (string, error) {
	if c.TokenFile == "" {
		if c.Token == "" {
			return "", nil
		}
		return c.Token, checkToken("WORKER_TOKEN", "WORKER_TOKEN", c.Token)
	}
	b, err := readFile("WORKER_TOKEN_FILE", c.TokenFile)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	return token, checkToken("WORKER_TOKEN_FILE", fmt.Sprintf("WORKER_TOKEN_FILE=%q", c.TokenFile), token)
}

// checkToken refuses a token that cannot travel in a header; where names its source and
// the message never shows the token.
func checkToken(name, where, token string) error {
	if token == "" {
		return &ConfigError{Var: name, msg: where + " is empty"}
	}
	for i := 0; i < len(token); i++ {
		if token[i] < 0x21 || token[i] > 0x7e {
			return &ConfigError{Var: name, msg: where +
				": the token holds a space, a control or a non-ASCII character (a bearer token is printable ASCII)"}
		}
	}
	return nil
}

// tlsConfig builds the client TLS configuration of one broker address from the files read
// now: the server name is that address's host, the roots BROKER_CA_FILE's (else the
// system's), and the client certificate WORKER_CERT_FILE + WORKER_KEY_FILE's when set.
func (c Config) tlsConfig(addr string) (*tls.Config, error) {
	target, err := dialTarget("BROKER_ADDR", addr)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(target)
	tc := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		b, err := readPEM("BROKER_CA_FILE", c.CAFile, "-----BEGIN CERTIFICATE-----", "CERTIFICATE")
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, invalid("BROKER_CA_FILE", c.CAFile, "no certificate in the file could be parsed")
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		certPEM, err := readPEM("WORKER_CERT_FILE", c.CertFile, "-----BEGIN CERTIFICATE-----", "CERTIFICATE")
		if err != nil {
			return nil, err
		}
		keyPEM, err := readPEM("WORKER_KEY_FILE", c.KeyFile, "PRIVATE KEY-----", "PRIVATE KEY")
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// crypto/tls's messages name what failed, never the key material.
			return nil, &ConfigError{Var: "WORKER_CERT_FILE", msg: fmt.Sprintf(
				"WORKER_CERT_FILE=%q and WORKER_KEY_FILE=%q are not a usable key pair: %v", c.CertFile, c.KeyFile, err)}
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

func readFile(name, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		reason := err.Error()
		if pe, ok := err.(*os.PathError); ok {
			reason = pe.Err.Error()
		}
		return nil, invalid(name, path, "cannot read the file: "+reason)
	}
	return b, nil
}

func readPEM(name, path, marker, label string) ([]byte, error) {
	b, err := readFile(name, path)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(b, []byte(marker)) {
		return nil, invalid(name, path, "the file holds no PEM "+label+" block")
	}
	return b, nil
}

// transportOptions are the dial options of one connect to addr: TLS or h2c transport
// credentials and, with a token, the bearer per-RPC credentials (files read now).
func (c Config) transportOptions(addr string) ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if isTLSAddr(addr) {
		tc, err := c.tlsConfig(addr)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	token, err := c.readToken()
	if err != nil {
		return nil, err
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return opts, nil
}

// bearer sends `authorization: Bearer <token>` on every RPC of a connection.
type bearer string

// GetRequestMetadata is the authorization header of every call.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false so that a token also works over plaintext h2c, which
// the broker accepts on loopback; TLS is chosen by the address, not by the token.
func (bearer) RequireTransportSecurity() bool { return false }

// String hides the token should the credentials ever be printed.
func (bearer) String() string { return "Bearer ***" }
