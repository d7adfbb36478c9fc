"""The test CA itself: a certificate without names carries no SubjectAlternativeName (an
empty one is invalid under RFC 5280 and refused by cryptography >= 51), and one with names
carries exactly them."""

from __future__ import annotations

import ipaddress

import pytest
from certs import CA
from cryptography import x509


def _load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_a_certificate_without_names_has_no_san_extension() -> None:
    cert, _ = CA().issue("w", client=True)
    with pytest.raises(x509.ExtensionNotFound):
        _load(cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_a_certificate_carries_its_hosts_and_uris() -> None:
    cert, _ = CA().issue("b", hosts=("127.0.0.1", "localhost"), uris=("spiffe://t/w",))
    san = _load(cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://t/w"]
