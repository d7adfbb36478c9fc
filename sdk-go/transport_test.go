package converge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"

	"converge.dev/sdk-go/internal/testcerts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

func noop() Provider {
	return ProviderFunc(KindVersion{"k", 1}, func(context.Context, *ReactionRequest) (*Outcome, error) { return nil, nil })
}

func TestNoTokenSendsNoAuthorization(t *testing.T) {
	fb, addr := startFakeBroker(t)
	serveFake(t, addr, []Provider{noop()})
	fb.nextStream(t).recv(t, false)
	if got := fb.seen(); !slices.Equal(got, []string{"GetProviderConfig ", "WorkStream "}) {
		t.Fatalf("calls: %q", got)
	}
}

func TestTokenFileIsSentOnBothRPCsAndReReadAtReconnect(t *testing.T) {
	fb, addr := startFakeBroker(t)
	f := testcerts.Write(t, t.TempDir(), "token", []byte("first-token\n"))
	// Plaintext h2c: the token does not require transport security.
	serveFake(t, "http://"+addr, []Provider{noop()}, edit(func(c *Config) { c.TokenFile = f }))
	s1 := fb.nextStream(t)
	s1.recv(t, false)
	if got := fb.seen(); !slices.Equal(got, []string{"GetProviderConfig Bearer first-token", "WorkStream Bearer first-token"}) {
		t.Fatalf("calls: %q", got)
	}
	if err := os.WriteFile(f, []byte("  rotated-token "), 0o600); err != nil {
		t.Fatal(err)
	}
	close(s1.done)
	fb.nextStream(t).recv(t, false)
	// The reconnect re-pulls the configs, then reopens the stream, both with the new token.
	if got := fb.seen()[2:]; !slices.Equal(got, []string{"GetProviderConfig Bearer rotated-token", "WorkStream Bearer rotated-token"}) {
		t.Fatalf("calls after the rotation: %q", got)
	}
}

func TestTLSWithAClientCertificateAndAToken(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	srvCert, srvKey := ca.Issue(t, testcerts.Leaf{CommonName: "broker", Hosts: []string{"127.0.0.1", "localhost"}})
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AppendCertsFromPEM(ca.PEM)
	// The fake broker refuses a handshake without a client certificate from the CA.
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: clients, ClientAuth: tls.RequireAndVerifyClientCert})
	fb, addr := startFakeBrokerWith(t, []grpc.ServerOption{grpc.Creds(creds)})

	dir := t.TempDir()
	cliCert, cliKey := ca.Issue(t, testcerts.Leaf{CommonName: "w", Client: true, URIs: []string{"spiffe://test/worker"}})
	caFile := testcerts.Write(t, dir, "ca.pem", ca.PEM)
	certFile := testcerts.Write(t, dir, "cert.pem", cliCert)
	keyFile := testcerts.Write(t, dir, "key.pem", cliKey)
	serveFake(t, "https://"+addr, []Provider{noop()}, edit(func(c *Config) {
		c.CAFile, c.CertFile, c.KeyFile, c.Token = caFile, certFile, keyFile, "tls-token"
	}))
	if sub := fb.nextStream(t).recv(t, false).GetSubscribe(); sub == nil {
		t.Fatal("the first frame over TLS must be Subscribe")
	}
	if got := fb.seen(); !slices.Equal(got, []string{"GetProviderConfig Bearer tls-token", "WorkStream Bearer tls-token"}) {
		t.Fatalf("calls: %q", got)
	}
}
