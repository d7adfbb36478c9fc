"""Schemathesis hooks for scripts/api-fuzz.sh (loaded through SCHEMATHESIS_HOOKS).

`watch=true` turns a read into a Server-Sent Events stream that stays open until the client
leaves: schemathesis reads it for the whole request timeout (10 s) and then checks the events
it got against the stream's schema. Its coverage phase sends a few such requests (it does not
pass through hooks); the fuzzing phase would send hundreds, so there the parameter is dropped
and the plain read fuzzed instead. Every other value of `watch` (false, or garbage that must
answer 400) is kept. The streams are tested by control/tests/openapi_answers.rs and
converge/tests/watch.rs.

`POST /api/v1/resources:batch` also takes `application/x-ndjson` (one JSON object per line),
documented as a string with an example: it is sent as that text, the way `text/plain` is.
"""

import schemathesis


@schemathesis.hook
def map_query(ctx, query):
    if query and str(query.get("watch")).lower() == "true":
        query = dict(query)
        del query["watch"]
    return query


schemathesis.serializer.alias("application/x-ndjson", "text/plain")
