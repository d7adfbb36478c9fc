"""Writes graph.json: conf-composite (conformance/KINDS.md) as a kro-style CEL graph.

A graph has one resource per possible child (spec.children is at most 50): resource c<i> is
present when i is below the count (default 2) and its spec's upstream_index is a reference to
c<i-1>'s status, which the engine turns into a dependency edge plus a value flow. Run
`python3 conformance/workers/cel/gen_graph.py` after changing it; the output is committed.
"""

import json
from pathlib import Path

MAX_CHILDREN = 50
COUNT = "(has(spec.children) ? spec.children : 2)"


def graph() -> dict:
    resources = []
    for i in range(MAX_CHILDREN):
        spec: dict = {"index": i}
        if i > 0:
            spec["upstream_index"] = "${c%d.status.echo.index}" % (i - 1)
        resources.append({
            "id": f"c{i}",
            "when": "${%s > %d}" % (COUNT, i),
            "template": {"kind": "conf-leaf", "kind_version": 1,
                         "name": "${root.name}-%d" % i, "spec": spec},
        })
    return {"resources": resources}


if __name__ == "__main__":
    out = Path(__file__).with_name("graph.json")
    out.write_text(json.dumps(graph(), indent=1) + "\n")
