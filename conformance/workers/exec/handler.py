#!/usr/bin/env python3
"""The stdworker exec form of the conformance suite: every kind of conformance/KINDS.md in
one exec handler (Python 3 standard library only).

stdworker runs this once per task with the request JSON on stdin; the response JSON goes to
stdout. Exit 0 = success, 2 = terminal failure, anything else = transient failure; the
failure's message is the stderr tail. The event log path and the form name arrive through
the provider config's `env` (CONFORMANCE_LOG, CONFORMANCE_FORM): stdworker passes none of
its own environment to handlers.
"""

import base64
import json
import os
import signal
import sys
import time

FORM = os.environ.get("CONFORMANCE_FORM") or "exec"
LOG = os.environ.get("CONFORMANCE_LOG")

EXIT_TERMINAL = 2
EXIT_TRANSIENT = 1


def record(req: dict, event: str, **extra: object) -> None:
    """Appends one event line with a single write on an O_APPEND file (atomic for the
    suite's reader, even with many handler processes writing at once); `extra` adds keys
    (`transition` and `dedup_token` on `react`)."""
    if not LOG:
        return
    line = json.dumps({
        "form": FORM,
        "kind": req.get("kind"),
        "name": req.get("name"),
        "reaction": req.get("reaction"),
        "stage": req.get("stage"),
        "generation": req.get("generation"),
        "attempt": req.get("attempt"),
        "event": event,
        **extra,
    }) + "\n"
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class Fail(Exception):
    """A handler failure: `terminal` picks exit code 2 over 1."""

    def __init__(self, message: str, terminal: bool = False):
        super().__init__(message)
        self.terminal = terminal


def spec_int(req: dict, key: str, default: int) -> int:
    v = (req.get("spec") or {}).get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def echo_status(req: dict) -> dict:
    return {"status": {
        "echo": req.get("spec"),
        "form": FORM,
        "generation": req["generation"],
        "attempt": req["attempt"],
        "trigger": req["trigger"],
    }}


def unknown_reaction(req: dict) -> Fail:
    return Fail(f"{req['kind']} has no reaction {req['reaction']!r}", terminal=True)


def conf_leaf(req: dict) -> dict:
    if req["reaction"] == "work":
        record(req, "work")
        return echo_status(req)
    if req["reaction"] == "ping":
        record(req, "operate")
        op = req.get("operation") or {}
        return {"output": {"pong": op.get("input"), "name": req["name"]}}
    raise unknown_reaction(req)


def conf_composite(req: dict) -> dict:
    n = spec_int(req, "children", 2)
    if req["reaction"] == "compose":
        record(req, "compose")
        name = lambda i: f"{req['name']}-{i}"  # noqa: E731
        children = [{"kind": "conf-leaf", "kind_version": 1, "name": name(i), "spec": {"index": i}}
                    for i in range(n)]
        # Child i waits for child i-1 and receives its echoed index.
        edges = [{"from": {"kind": "conf-leaf", "name": name(i)},
                  "to": {"kind": "conf-leaf", "name": name(i - 1)},
                  "values": [{"dependent_field": "/upstream_index", "source_field": "/echo/index"}]}
                 for i in range(1, n)]
        return {"status": {"composed": n}, "children": children, "edges": edges}
    if req["reaction"] == "rollup":
        record(req, "rollup")
        desc = req.get("descendants") or []
        return {"status": {"composed": n, "descendants": len(desc),
                           "ready": sum(1 for d in desc if d.get("is_ready"))}}
    raise unknown_reaction(req)


def conf_final(req: dict) -> dict:
    if req["reaction"] == "work":
        record(req, "work")
        return echo_status(req)
    if req["reaction"] == "teardown":
        record(req, "delete")
        if req["attempt"] <= spec_int(req, "delete_failures", 0):
            raise Fail(f"teardown failure {req['attempt']}")
        return {}  # an empty success releases the finalizer
    raise unknown_reaction(req)


def conf_fail(req: dict) -> dict:
    if req["reaction"] != "work":
        raise unknown_reaction(req)
    record(req, "work")
    ok = {"status": {"ok": True, "attempt": req["attempt"]}}
    mode = (req.get("spec") or {}).get("mode", "ok")
    if mode == "ok":
        return ok
    if mode == "terminal":
        raise Fail("conformance terminal", terminal=True)
    if mode == "transient":
        times = spec_int(req, "times", 0)
        if times == 0 or req["attempt"] <= times:
            raise Fail(f"conformance transient {req['attempt']}")
        return ok
    if mode == "panic":
        # Not a Fail on purpose: an uncaught exception exits 1 with a traceback on stderr,
        # which stdworker must report as a transient failure.
        raise RuntimeError(f"conformance panic at attempt {req['attempt']}")
    raise Fail(f"unknown conf-fail mode {mode!r}", terminal=True)


def conf_slow(req: dict) -> dict:
    if req["reaction"] != "work":
        raise unknown_reaction(req)

    # Cancellation in the exec form is SIGTERM to the process group (deadline, CancelTask,
    # worker shutdown): log it and exit non-zero, as a cooperative handler would.
    def on_term(_sig, _frame):
        record(req, "cancelled")
        os._exit(143)

    signal.signal(signal.SIGTERM, on_term)
    record(req, "work")
    ms = max(spec_int(req, "sleep_ms", 0), 0)
    time.sleep(ms / 1000)
    return {"status": {"slept_ms": ms, "attempt": req["attempt"]}}


def conf_react(req: dict) -> dict:
    # The request is the watched resource's (name, spec); stdworker adds the delivery's
    # transition and dedup token for a STAGE_REACT task.
    if req["reaction"] != "react":
        raise unknown_reaction(req)
    record(req, "react", transition=req.get("transition"), dedup_token=req.get("dedup_token"))
    if req["attempt"] <= spec_int(req, "react_failures", 0):
        raise Fail(f"react failure {req['attempt']}")
    return {}


def conf_ready(req: dict) -> dict:
    # Readiness is stdworker's: the kind is ready while its default config has a program
    # and no "ready": false. The handler is a plain leaf.
    if req["reaction"] != "work":
        raise unknown_reaction(req)
    record(req, "work")
    return echo_status(req)


def conf_config(req: dict) -> dict:
    if req["reaction"] != "work":
        raise unknown_reaction(req)
    record(req, "work")
    bundle = req.get("bundle")
    return {"status": {
        # `settings` is the exec form's effective config: stdworker merged default and
        # override before the process started.
        "config": req.get("settings"),
        "bundle_len": len(base64.b64decode(bundle)) if bundle else 0,
    }}


KINDS = {
    "conf-leaf": conf_leaf,
    "conf-composite": conf_composite,
    "conf-final": conf_final,
    "conf-fail": conf_fail,
    "conf-slow": conf_slow,
    "conf-hold": conf_slow,
    "conf-react": conf_react,
    "conf-ready": conf_ready,
    "conf-config": conf_config,
}


def main() -> int:
    req = json.load(sys.stdin)
    handler = KINDS.get(req.get("kind"))
    if handler is None:
        print(f"no conformance kind {req.get('kind')!r}", file=sys.stderr)
        return EXIT_TERMINAL
    try:
        out = handler(req)
    except Fail as e:
        print(str(e), file=sys.stderr)
        return EXIT_TERMINAL if e.terminal else EXIT_TRANSIENT
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
