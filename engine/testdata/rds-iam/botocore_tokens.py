"""Prints RDS IAM auth tokens made by botocore's own `generate_db_auth_token`, for fixed
credentials, clock, region, host, port and user: the expected strings of
`engine/src/db/iam.rs`'s test `tokens_match_botocore` (committed there, so the Rust test needs
no Python). Regenerate with the exact botocore version named in that test:

    python3 -m venv /tmp/botocore-venv
    /tmp/botocore-venv/bin/pip install botocore==1.44.18
    /tmp/botocore-venv/bin/python engine/testdata/rds-iam/botocore_tokens.py

The credentials are AWS's documented example keys (never a real account's).
"""

import datetime
import json

import botocore
import botocore.auth
import botocore.session
from botocore.credentials import Credentials

# The signer reads the clock through this one function; fixing it fixes X-Amz-Date.
NOW = datetime.datetime(2026, 5, 4, 12, 36, 0)
botocore.auth.get_current_datetime = lambda *a, **k: NOW

CASES = [
    # (name, host, port, user, region, session token)
    ("aurora", "mydb.cluster-abc123xyz.eu-west-1.rds.amazonaws.com", 5432, "converge",
     "eu-west-1", None),
    ("with-session-token", "db.example.internal", 6543, "app_user", "us-east-1",
     "FQoGZXIvYXdzEXAMPLESESSIONTOKEN/+=="),
]

out = {"botocore": botocore.__version__, "now": NOW.isoformat() + "Z", "tokens": {}}
for name, host, port, user, region, token in CASES:
    session = botocore.session.Session()
    session.set_credentials(
        "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token
    )
    client = session.create_client("rds", region_name=region)
    out["tokens"][name] = client.generate_db_auth_token(
        DBHostname=host, Port=port, DBUsername=user, Region=region
    )
print(json.dumps(out, indent=2))
