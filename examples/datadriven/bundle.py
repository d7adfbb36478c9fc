#!/usr/bin/env python3
"""Prints a provider config with a Starlark bundle: CONFIG.json with `data` set to the
base64 of a zip of DIR's files (paths relative to DIR, so DIR/compose.star is the bundle's
compose.star), ready for `POST /api/v1/providerconfigs`.

    examples/datadriven/bundle.py CONFIG.json DIR | curl -X POST .../providerconfigs -d @-

The zip is deterministic (sorted entries, fixed timestamps), so the same files always make
the same bundle and re-applying an unchanged config changes nothing.
"""

import base64
import io
import json
import os
import sys
import zipfile


def bundle(directory: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for dirpath, dirnames, filenames in os.walk(directory):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                info = zipfile.ZipInfo(os.path.relpath(path, directory), date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as f:
                    z.writestr(info, f.read())
    return out.getvalue()


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        config = json.load(f)
    config["data"] = base64.b64encode(bundle(sys.argv[2])).decode()
    json.dump(config, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
