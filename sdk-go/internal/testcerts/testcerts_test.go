package testcerts

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"testing"
)

// oidSAN is id-ce-subjectAltName (RFC 5280 4.2.1.6).
var oidSAN = asn1.ObjectIdentifier{2, 5, 29, 17}

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// A certificate without names has no SubjectAlternativeName extension: an empty one is
// invalid under RFC 5280 and newer TLS libraries refuse it.
func TestLeafWithoutNamesHasNoSAN(t *testing.T) {
	cert := parse(t, first(NewCA(t, "ca").Issue(t, Leaf{CommonName: "w", Client: true})))
	for _, ext := range cert.Extensions {
		if ext.Id.Equal(oidSAN) {
			t.Fatalf("a certificate without names carries a SAN extension: %x", ext.Value)
		}
	}
}

func TestLeafCarriesItsNames(t *testing.T) {
	cert := parse(t, first(NewCA(t, "ca").Issue(t, Leaf{
		CommonName: "b", Hosts: []string{"127.0.0.1", "localhost"}, URIs: []string{"spiffe://t/w"},
	})))
	if len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != "127.0.0.1" {
		t.Fatalf("IP SANs = %v", cert.IPAddresses)
	}
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != "localhost" {
		t.Fatalf("DNS SANs = %v", cert.DNSNames)
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://t/w" {
		t.Fatalf("URI SANs = %v", cert.URIs)
	}
}

func first(a, _ []byte) []byte { return a }
