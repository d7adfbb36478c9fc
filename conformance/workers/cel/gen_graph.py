"""Writes the cel form's graphs (kro-style CEL graphs, one per kind it composes).

graph.json is conf-composite (conformance/KINDS.md): one resource per possible child
(spec.children is at most 50); resource c<i> is present when i is below the count (default 2)
and its spec's upstream_index is a reference to c<i-1>'s status, which the engine turns into
a dependency edge plus a value flow. The compose-stage kinds of conformance/kinds/composer/
get small graphs of their own (cfail.json, spin.json, ready.json). Run
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


def probe(when: str) -> dict:
    """A graph of one conf-leaf child, composed when ``when`` (an expression) is true."""
    return {"resources": [{
        "id": "probe",
        "when": when,
        "template": {"kind": "conf-leaf", "kind_version": 1, "name": "${root.name}-probe",
                     "spec": {}},
    }]}


# conf-cfail: `terminal` reads a key the spec cannot have, `error` converts a word to an
# integer (both evaluation errors, hence terminal); `ok` composes nothing.
MODE = "(has(spec.mode) ? spec.mode : 'ok')"
CFAIL = probe("${%s == 'terminal' ? spec.conformance_terminal : "
              "(%s == 'error' ? int('conformance_error') > 0 : false)}" % (MODE, MODE))
# conf-cslow, conf-chold: len(spin)^2 steps of a comprehension that never matches, so the
# suite sizes a compose's run time from the outside; composes nothing.
SPIN = probe("${has(spec.spin) && spec.spin.exists(a, spec.spin.exists(b, false))}")
# conf-cready: composes nothing; the kind is about the graph being there at all.
READY = probe("${has(spec.never)}")


if __name__ == "__main__":
    here = Path(__file__).parent
    for name, g in (("graph.json", graph()), ("cfail.json", CFAIL), ("spin.json", SPIN),
                    ("ready.json", READY)):
        (here / name).write_text(json.dumps(g, indent=1) + "\n")
