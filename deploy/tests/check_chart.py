"""Checks what the converge chart renders against what converge itself expects.

kubeconform proves each object is valid Kubernetes; this proves the objects fit together and
fit converge (control/src/config.rs, converge/src/server.rs):

- one Deployment per role, with ROLE set to it;
- every address variable's port is a declared container port, and the probes hit /livez and
  /readyz on the port the role serves them on (LISTEN_ADDR for control, HEALTH_ADDR for a
  broker), over HTTPS exactly when TLS is on;
- a broker's terminationGracePeriodSeconds exceeds its preStop sleep plus SHUTDOWN_DRAIN, so
  the kubelet never kills a broker that is still draining;
- DATABASE_URL (and DATABASE_READ_URL, on control pods only) comes from a Secret, never a literal; AUTH_FILE (or AUTH=none) is set and every
  file variable points into a mounted volume; no environment value looks like a credential;
- pods run as a non-root user without privilege escalation;
- Services, PodDisruptionBudgets and ServiceMonitors select the pods of one role, by port
  names those pods declare; every Secret a pod reads is rendered, or named as external.

    python check_chart.py RENDERED.yaml [--external-secret NAME ...]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

FILE_VARS = ("AUTH_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE", "TLS_CLIENT_CA_FILE", "SECRETS_KEY_FILE")
CREDENTIAL = re.compile(r"(postgres(ql)?://[^@/]*:[^@/]*@|-----BEGIN)")


def seconds(duration: str) -> float:
    """A converge duration (proto/src/duration.rs: 500ms, 45s, 2m, 1h, bare seconds)."""
    m = re.fullmatch(r"([0-9.]+)(ms|s|m|h)?", duration.strip())
    if not m:
        raise ValueError(f"{duration!r} is not a converge duration")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def port_of(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class Check:
    def __init__(self, docs: list[dict[str, Any]], external: set[str]):
        self.docs, self.external = docs, external
        self.problems: list[str] = []

    def fail(self, obj: dict[str, Any], msg: str) -> None:
        self.problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {msg}")

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def run(self) -> list[str]:
        deployments = self.of("Deployment")
        roles = sorted(d["metadata"]["labels"].get("app.kubernetes.io/component", "") for d in deployments)
        if roles != ["broker", "control"]:
            self.problems.append(f"expected one control and one broker Deployment, found {roles}")
        secrets = {s["metadata"]["name"] for s in self.of("Secret")} | self.external
        for d in deployments:
            self.deployment(d, secrets)
        self.selectors(deployments)
        return self.problems

    def deployment(self, d: dict[str, Any], secrets: set[str]) -> None:
        role = d["metadata"]["labels"]["app.kubernetes.io/component"]
        pod = d["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        env = {e["name"]: e for e in c.get("env", [])}
        value = {k: e.get("value") for k, e in env.items()}
        if value.get("ROLE") != role:
            self.fail(d, f"ROLE is {value.get('ROLE')!r}, the component label says {role}")
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        addr_vars = {"control": {"LISTEN_ADDR": "http"}, "broker": {"BROKER_LISTEN_ADDR": "grpc", "HEALTH_ADDR": "health"}}[role]
        for var, name in addr_vars.items():
            if var not in value:
                self.fail(d, f"{var} is not set")
            elif ports.get(name) != port_of(value[var]):
                self.fail(d, f"{var}={value[var]} but the container port {name} is {ports.get(name)}")
        probe_port = "http" if role == "control" else "health"
        scheme = "HTTPS" if "TLS_CERT_FILE" in value else "HTTP"
        for probe, path in (("startupProbe", "/livez"), ("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
            get = c.get(probe, {}).get("httpGet")
            if not get:
                self.fail(d, f"no {probe}")
            elif (get["path"], get["port"], get.get("scheme", "HTTP")) != (path, probe_port, scheme):
                self.fail(d, f"{probe} is {get}, expected {path} on {probe_port} over {scheme}")
        sleep = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if role == "broker":
            if "SHUTDOWN_DRAIN" not in value:
                self.fail(d, "SHUTDOWN_DRAIN is not set")
            elif grace <= sleep + seconds(value["SHUTDOWN_DRAIN"]):
                self.fail(d, f"terminationGracePeriodSeconds {grace} does not exceed preStop {sleep}s + SHUTDOWN_DRAIN {value['SHUTDOWN_DRAIN']}")
        elif grace <= sleep:
            self.fail(d, f"terminationGracePeriodSeconds {grace} leaves no time after the preStop sleep {sleep}s")
        db = env.get("DATABASE_URL", {})
        ref = db.get("valueFrom", {}).get("secretKeyRef")
        if not ref:
            self.fail(d, "DATABASE_URL must come from a Secret (secretKeyRef)")
        if "DATABASE_READ_URL" in env:
            if role != "control":
                self.fail(d, "DATABASE_READ_URL is read by control pods only")
            if not env["DATABASE_READ_URL"].get("valueFrom", {}).get("secretKeyRef"):
                self.fail(d, "DATABASE_READ_URL must come from a Secret (secretKeyRef)")
        if ("AUTH_FILE" in value) == (value.get("AUTH") == "none"):
            self.fail(d, "exactly one of AUTH_FILE and AUTH=none must be set")
        mounts = [m["mountPath"].rstrip("/") + "/" for m in c.get("volumeMounts", [])]
        for var in FILE_VARS:
            if var in value and not any(value[var].startswith(m) for m in mounts):
                self.fail(d, f"{var}={value[var]} is not inside a mounted volume")
        for path in (value.get("SECRETS_OLD_KEY_FILES") or "").split(","):
            if path and not any(path.startswith(m) for m in mounts):
                self.fail(d, f"SECRETS_OLD_KEY_FILES names {path}, which is not inside a mounted volume")
        if "SECRETS_OLD_KEY_FILES" in value and "SECRETS_KEY_FILE" not in value:
            self.fail(d, "SECRETS_OLD_KEY_FILES without SECRETS_KEY_FILE (converge refuses to start)")
        for k, v in value.items():
            if v and CREDENTIAL.search(v):
                self.fail(d, f"{k} carries a credential in the manifest: use a Secret")
        sc, psc = c.get("securityContext", {}), pod.get("securityContext", {})
        if not (psc.get("runAsNonRoot") or sc.get("runAsNonRoot")):
            self.fail(d, "runAsNonRoot is not set")
        if sc.get("allowPrivilegeEscalation", True) or sc.get("privileged"):
            self.fail(d, "the container may escalate privileges")
        used = [e["valueFrom"]["secretKeyRef"]["name"] for e in env.values() if "secretKeyRef" in e.get("valueFrom", {})]
        for v in pod.get("volumes", []):
            if "secret" in v:
                used.append(v["secret"]["secretName"])
            for src in v.get("projected", {}).get("sources", []):
                if "secret" in src:
                    used.append(src["secret"]["name"])
        for name in used:
            if name not in secrets:
                self.fail(d, f"reads Secret {name}, which is neither rendered nor named external")

    def selectors(self, deployments: list[dict[str, Any]]) -> None:
        pods = [
            (d, d["spec"]["template"]["metadata"]["labels"], {p["name"] for p in d["spec"]["template"]["spec"]["containers"][0].get("ports", [])})
            for d in deployments
        ]
        for kind, sel in (("Service", lambda o: o["spec"]["selector"]), ("PodDisruptionBudget", lambda o: o["spec"]["selector"]["matchLabels"])):
            for o in self.of(kind):
                hit = [(d, names) for d, labels, names in pods if selects(sel(o), labels)]
                if len(hit) != 1:
                    self.fail(o, f"selects the pods of {len(hit)} Deployments, expected 1")
                    continue
                for p in o["spec"].get("ports", []) if kind == "Service" else []:
                    if p["targetPort"] not in hit[0][1]:
                        self.fail(o, f"targetPort {p['targetPort']} is not a port of {hit[0][0]['metadata']['name']}")
        services = self.of("Service")
        for sm in self.of("ServiceMonitor"):
            sel = sm["spec"]["selector"]["matchLabels"]
            svc = [s for s in services if selects(sel, s["metadata"]["labels"])]
            if len(svc) != 1:
                self.fail(sm, f"selects {len(svc)} Services, expected 1")
                continue
            ports = {p["name"] for p in svc[0]["spec"]["ports"]}
            for ep in sm["spec"]["endpoints"]:
                if ep["port"] not in ports or ep.get("path") != "/metrics":
                    self.fail(sm, f"endpoint {ep['port']}{ep.get('path')} is not /metrics on a port of {svc[0]['metadata']['name']}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rendered", type=Path)
    p.add_argument("--external-secret", action="append", default=[], help="a Secret the pods may read without the chart rendering it")
    a = p.parse_args()
    docs = [d for d in yaml.safe_load_all(a.rendered.read_text()) if d]
    problems = Check(docs, set(a.external_secret)).run()
    for msg in problems:
        print(f"check_chart: {a.rendered.name}: {msg}", file=sys.stderr)
    kinds = sorted({d["kind"] for d in docs})
    print(f"check_chart: {a.rendered.name}: {len(docs)} objects ({', '.join(kinds)}), {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
