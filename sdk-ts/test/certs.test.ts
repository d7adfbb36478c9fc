/**
 * The test CA itself: a certificate without names carries no SubjectAlternativeName (an
 * empty one is invalid under RFC 5280, and newer TLS libraries refuse it), and one with
 * names carries exactly them.
 */

import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { CA } from "./e2e-harness.js";

test("a certificate without names has no SubjectAlternativeName extension", () => {
  const { cert } = new CA().issue("w", [], true);
  assert.equal(new X509Certificate(readFileSync(cert)).subjectAltName, undefined);
});

test("a certificate carries the names it was issued for", () => {
  const { cert } = new CA().issue("b", ["IP:127.0.0.1", "DNS:localhost", "URI:spiffe://t/w"]);
  const san = new X509Certificate(readFileSync(cert)).subjectAltName ?? "";
  assert.deepEqual(san.split(", ").sort(), ["DNS:localhost", "IP Address:127.0.0.1", "URI:spiffe://t/w"]);
});
