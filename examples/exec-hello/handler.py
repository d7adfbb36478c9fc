#!/usr/bin/env python3
"""exec-hello: an exec handler for stdworker that greets its resource.

Reads one request document (JSON) on stdin and writes one response document on stdout.
Exit 0 = success, 2 = terminal failure (no retry until the spec changes), anything else =
transient failure (retried with backoff). Whatever goes to stderr ends up, trimmed to its
tail, in the resource's failure message. See README.md beside this file for the protocol.
"""

import json
import sys


def main() -> int:
    req = json.load(sys.stdin)
    spec = req.get("spec") or {}
    settings = req.get("settings") or {}

    if spec.get("fail") == "terminal":
        print("spec.fail asks for a terminal failure", file=sys.stderr)
        return 2
    if spec.get("fail") == "transient":
        print(f"spec.fail asks for a transient failure (attempt {req['attempt']})", file=sys.stderr)
        return 1

    # The spec's greeting wins; otherwise the kind's providerconfig settings; otherwise "hello".
    greeting = spec.get("greeting") or settings.get("greeting") or "hello"
    json.dump(
        {
            "status": {
                "message": f"{greeting}, {req['name']}!",
                "observed_generation": req["generation"],
                "attempt": req["attempt"],
            },
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Greeted", "message": "the greeting is ready"}
            ],
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
