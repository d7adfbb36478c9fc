"""Drift check: regenerating the protobuf/gRPC code with the pinned generator must reproduce
the committed files byte for byte."""

import os
import subprocess
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[1]
COMMITTED = SDK / "src" / "converge_sdk" / "_proto"


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    out = tmp_path / "proto"
    subprocess.run(
        ["bash", str(SDK / "scripts" / "gen.sh"), str(out)],
        check=True,
        env=dict(os.environ, PYTHON=sys.executable),
    )
    generated = sorted(p.name for p in out.iterdir())
    committed = sorted(p.name for p in COMMITTED.iterdir() if p.is_file())
    assert generated == committed
    stale = [n for n in generated if (out / n).read_bytes() != (COMMITTED / n).read_bytes()]
    assert not stale, f"generated code drifted from worker.proto: {stale}; run sdk-python/scripts/gen.sh"
