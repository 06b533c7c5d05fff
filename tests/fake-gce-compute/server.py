#!/usr/bin/env python3
"""The project's own Compute Engine test server: NOT Google's, NOT an emulator.

No emulator of the Compute Engine API exists, so the GCE census tests (tests/gce.rs) talk to
this small server instead. It serves the four read calls the census makes:

    GET /compute/v1/projects/P/aggregated/disks
    GET /compute/v1/projects/P/zones/Z/disks
    GET /compute/v1/projects/P/regions/R/disks
    GET /compute/v1/projects/P/global/snapshots

with `maxResults`/`pageToken`/`nextPageToken`, the aggregated `items` map keyed `zones/Z` and
`regions/R` with a `NO_RESULTS_ON_PAGE` warning for every scope without disks on the page, and
errors injected per scope (an HTTP status with Google's error body, a request that hangs, or one
answered normally after a delay).

It cannot drift from the real API's shape unnoticed: **every response body it sends is validated
against Google's published discovery document for compute v1** (`--discovery`, from the
`google-api-python-client` wheel, installed by scripts/gce-python.sh) — the schema of the
method's response (`DiskAggregatedList`, `DiskList`, `SnapshotList`), unknown fields and wrong types rejected.
A response that fails is not sent: the client gets a 500 naming the violation. The query
parameters of each request are checked against the method's declared parameters too.

Authentication runs for real. `--write-keys DIR` makes an RSA key at start and writes
`DIR/key.json`, a service-account key file (as the Cloud console issues them) whose public part
this server trusts, and `DIR/foreign-key.json`, the same account and key id signed with another
key. google-cloud-auth signs a JWT with the key (RS256) and sends it as the bearer token
(self-signed JWT, AIP-4111); every disk request must carry one whose signature verifies with the
trusted key, whose `iss`/`sub` is the account, whose `kid` is the key's id, whose `scope` grants
compute read access (or whose `aud` is the Compute service), and that has not expired; anything
else is 401. (google-cloud-auth never calls `token_uri` for a service-account key: it sends the
self-signed JWT itself. The key file's `token_uri` points at this server all the same, where
there is no token endpoint, so a client that went to Google's would not go unnoticed.)

State (`--state FILE`, JSON):

    {"project": "p1",
     "zones": ["us-central1-a", ...], "regions": ["us-central1", ...],   # the scopes that exist
     "disks": [{"zone": "us-central1-a", ...Disk fields as the API returns them...},
               {"region": "us-central1", "replicaZones": [...], ...}],
     "snapshots": [{...Snapshot fields..., "sourceDisk": "zones/us-central1-a/disks/d"}],
     "errors": {"zones/us-central1-b": {"status": 403},
                "global/snapshots": {"status": 403},                     # snapshots.list
                "regions/europe-west1": {"hang": 30},                  # then 503
                "zones/europe-west1-b": {"delay": 4},                  # then the answer
                "aggregated": {"status": 500}},                         # the aggregated call
     "unreachable": ["zones/asia-east1-a"]}                             # UNREACHABLE in aggregated

`selfLink`, `kind`, `zone`/`region` URLs (and a snapshot's `sourceDisk` URL) are filled in. `GET /_fake/requests` (not Compute's)
answers how many requests each path has had, so that tests can count retries and pages. `--validate SCHEMA` checks a body on
stdin against a schema and exits 1 when it does not match (the tests prove the validator fails).

The state can change while the server runs, so that a test can delete a disk or make a scope
hang mid-run: each request first reads the file again when its mtime, size or inode changed,
under the server's lock (a request sees one whole state, and every request counted after a
rewrite sees the new one). Write it whole (a new file renamed over the old one): a request that
reads a file that is not a valid state answers 500 naming why, and the next one reads it again.

Listens on 127.0.0.1 only; prints `listening PORT` on stdout when it accepts connections; exits
when its parent (the test) does.
"""

import argparse
import base64
import hashlib
import json
import os
import pathlib
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMPUTE = "https://www.googleapis.com/compute/v1"
READ_SCOPES = {
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/cloud-platform.read-only",
    "https://www.googleapis.com/auth/compute",
    "https://www.googleapis.com/auth/compute.readonly",
}
# Parameters every Google API accepts besides the method's own (the discovery document's
# top-level `parameters`), and `$alt`: Google's front end takes system parameters with a `$`
# prefix too, and google-cloud-rust sends `$alt=json` on every request.
STANDARD_PARAMS = {"$.xgafv", "access_token", "alt", "callback", "fields", "key", "oauth_token",
                   "prettyPrint", "quotaUser", "upload_protocol", "uploadType", "userIp", "$alt"}


# ---------------------------------------------------------------------------------------------
# Discovery-schema validation


class SchemaError(Exception):
    pass


INT64 = re.compile(r"^-?[0-9]+$")
UINT64 = re.compile(r"^[0-9]+$")


class Validator:
    """Checks a JSON value against a discovery document's schema: `type`, `properties` (an
    unknown property is an error unless the schema has `additionalProperties`),
    `additionalProperties`, `items`, `$ref`, `enum`, and the formats that change the JSON type
    (`int64`/`uint64` are strings of digits; `int32`/`uint32` integers in range; `byte` base64;
    `date-time` RFC 3339)."""

    def __init__(self, doc):
        self.schemas = doc["schemas"]

    def check(self, value, schema_name):
        self._check(value, {"$ref": schema_name}, schema_name)

    def _check(self, v, s, path):
        if "$ref" in s:
            name = s["$ref"]
            if name not in self.schemas:
                raise SchemaError(f"{path}: unknown schema {name}")
            return self._check(v, self.schemas[name], path)
        t = s.get("type")
        fmt = s.get("format")
        if t == "object":
            if not isinstance(v, dict):
                raise SchemaError(f"{path}: expected an object, got {type(v).__name__}")
            props = s.get("properties", {})
            extra = s.get("additionalProperties")
            for k, x in v.items():
                if k in props:
                    self._check(x, props[k], f"{path}.{k}")
                elif extra is not None:
                    self._check(x, extra, f"{path}[{k!r}]")
                else:
                    raise SchemaError(f"{path}: unknown field {k!r}")
        elif t == "array":
            if not isinstance(v, list):
                raise SchemaError(f"{path}: expected an array, got {type(v).__name__}")
            for i, x in enumerate(v):
                self._check(x, s["items"], f"{path}[{i}]")
        elif t == "string":
            if not isinstance(v, str):
                raise SchemaError(f"{path}: expected a string ({fmt or 'plain'}), got {v!r}")
            if fmt == "int64" and not INT64.match(v):
                raise SchemaError(f"{path}: int64 must be a decimal string, got {v!r}")
            if fmt == "uint64" and not UINT64.match(v):
                raise SchemaError(f"{path}: uint64 must be a decimal string, got {v!r}")
            if fmt == "byte":
                try:
                    base64.b64decode(v.replace("-", "+").replace("_", "/") + "==", validate=False)
                except Exception as e:  # noqa: BLE001
                    raise SchemaError(f"{path}: not base64: {e}") from None
            if "enum" in s and v not in s["enum"]:
                raise SchemaError(f"{path}: {v!r} is not one of the enum's values")
        elif t == "integer":
            if not isinstance(v, int) or isinstance(v, bool):
                raise SchemaError(f"{path}: expected an integer, got {v!r}")
            if fmt == "int32" and not -(2**31) <= v < 2**31:
                raise SchemaError(f"{path}: {v} out of int32 range")
            if fmt == "uint32" and not 0 <= v < 2**32:
                raise SchemaError(f"{path}: {v} out of uint32 range")
        elif t == "number":
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise SchemaError(f"{path}: expected a number, got {v!r}")
        elif t == "boolean":
            if not isinstance(v, bool):
                raise SchemaError(f"{path}: expected a boolean, got {v!r}")
        elif t == "any" or t is None:
            pass
        else:
            raise SchemaError(f"{path}: unsupported schema type {t!r}")


# ---------------------------------------------------------------------------------------------
# RS256 JWTs


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class Keys:
    """The service account this server trusts: one RSA key, made at start."""

    def __init__(self, out_dir, port):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.email = "volume-leftovers-census@fake-project.iam.gserviceaccount.com"
        self.kid = hashlib.sha1(os.urandom(16)).hexdigest()
        trusted = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public = trusted.public_key()
        out = pathlib.Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, key in (("key.json", trusted), ("foreign-key.json", foreign)):
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
            body = {
                "type": "service_account",
                "project_id": "fake-project",
                "private_key_id": self.kid,
                "private_key": pem,
                "client_email": self.email,
                "client_id": "100000000000000000001",
                "auth_uri": f"http://127.0.0.1:{port}/auth",
                "token_uri": f"http://127.0.0.1:{port}/token",
                "auth_provider_x509_cert_url": f"http://127.0.0.1:{port}/certs",
                "universe_domain": "googleapis.com",
            }
            path = out / name
            tmp = out / (name + ".tmp")
            tmp.write_text(json.dumps(body, indent=2))
            os.chmod(tmp, 0o600)
            tmp.replace(path)

    def verify_jwt(self, token):
        """The claims of a JWT signed by the trusted key; PermissionError saying why not."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        parts = token.split(".")
        if len(parts) != 3:
            raise PermissionError("not a JWT")
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except Exception as e:  # noqa: BLE001
            raise PermissionError(f"malformed JWT: {e}") from None
        if header.get("alg") != "RS256":
            raise PermissionError(f"alg {header.get('alg')!r}, expected RS256")
        if header.get("kid") not in (None, self.kid):
            raise PermissionError("unknown key id")
        try:
            self.public.verify(sig, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                               hashes.SHA256())
        except InvalidSignature:
            raise PermissionError("the JWT's signature does not verify") from None
        if claims.get("iss") != self.email:
            raise PermissionError(f"iss {claims.get('iss')!r} is not the service account")
        if claims.get("sub", self.email) != self.email:
            raise PermissionError("sub is not the service account")
        now = time.time()
        if not isinstance(claims.get("exp"), int) or claims["exp"] < now:
            raise PermissionError("expired")
        if not isinstance(claims.get("iat"), int) or claims["iat"] > now + 300:
            raise PermissionError("issued in the future")
        if claims["exp"] - claims["iat"] > 3600 + 600:
            raise PermissionError("lifetime over one hour")
        scopes = set((claims.get("scope") or "").split())
        aud = claims.get("aud")
        if not (scopes & READ_SCOPES) and aud not in ("https://compute.googleapis.com/",
                                                      "https://compute.googleapis.com"):
            raise PermissionError("neither a compute scope nor the compute audience")
        return claims


# ---------------------------------------------------------------------------------------------
# The server


class Snapshot:
    """One reading of the state file, with the disks keyed by scope. ValueError when it is not a
    valid state."""

    def __init__(self, text):
        s = json.loads(text)
        self.project = s["project"]
        self.zones = list(s.get("zones", []))
        self.regions = list(s.get("regions", []))
        self.errors = dict(s.get("errors", {}))
        self.unreachable = list(s.get("unreachable", []))
        self.snapshots = []
        for sn in s.get("snapshots", []):
            sn = dict(sn)
            sn.setdefault("kind", "compute#snapshot")
            sn["selfLink"] = f"{COMPUTE}/projects/{self.project}/global/snapshots/{sn['name']}"
            if "sourceDisk" in sn and not sn["sourceDisk"].startswith("http"):
                sn["sourceDisk"] = f"{COMPUTE}/projects/{self.project}/{sn['sourceDisk']}"
            self.snapshots.append(sn)
        self.disks = {}  # scope -> [disk]
        for z in self.zones:
            self.disks[f"zones/{z}"] = []
        for r in self.regions:
            self.disks[f"regions/{r}"] = []
        for d in s.get("disks", []):
            d = dict(d)
            p = self.project
            if "zone" in d:
                scope = f"zones/{d['zone']}"
                d["zone"] = f"{COMPUTE}/projects/{p}/zones/{d['zone']}"
            else:
                scope = f"regions/{d['region']}"
                d["region"] = f"{COMPUTE}/projects/{p}/regions/{d['region']}"
                d["replicaZones"] = [f"{COMPUTE}/projects/{p}/zones/{z}"
                                     for z in d.get("replicaZones", [])]
            if scope not in self.disks:
                raise ValueError(f"state: disk {d.get('name')} in unknown scope {scope}")
            d.setdefault("kind", "compute#disk")
            d["selfLink"] = f"{COMPUTE}/projects/{p}/{scope}/disks/{d['name']}"
            if "type" in d and "/" not in d["type"]:
                d["type"] = f"{COMPUTE}/projects/{p}/{scope}/diskTypes/{d['type']}"
            self.disks[scope].append(d)


class State:
    """The state file's latest reading, and the requests counted across readings."""

    def __init__(self, path):
        self.path = pathlib.Path(path)
        self.stamp = None  # (mtime, size, inode) of the file last read
        self.current = None
        self.requests = {}  # path -> requests (GET /_fake/requests)
        self.lock = threading.Lock()
        self.refresh()

    def refresh(self):
        """The current state, the file read again when it changed. Call with the lock held."""
        st = self.path.stat()
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self.stamp:
            self.current = Snapshot(self.path.read_text())
            self.stamp = stamp
        return self.current


def page_of(items, query):
    """One page of `items` and the next page's token, as `maxResults`/`pageToken` ask."""
    n = int(query.get("maxResults", ["500"])[0])
    if not 0 <= n <= 500:
        raise ValueError(f"maxResults {n} out of range [0, 500]")
    n = n or 500
    start = 0
    if query.get("pageToken", [""])[0]:  # an empty token is the first page (as Google's)
        try:
            start = int(base64.urlsafe_b64decode(query["pageToken"][0].encode()).decode()
                        .removeprefix("offset:"))
        except Exception:  # noqa: BLE001
            raise ValueError("invalid pageToken") from None
    end = start + n
    token = base64.urlsafe_b64encode(f"offset:{end}".encode()).decode() if end < len(items) else None
    return items[start:end], token


def google_error(status, message, reason):
    # The error body Compute Engine sends (the JSON error format of Google's REST APIs).
    names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
             404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
             503: "UNAVAILABLE"}
    return {"error": {"code": status, "message": message,
                      "errors": [{"message": message, "domain": "global", "reason": reason}],
                      "status": names.get(status, "UNKNOWN")}}


REASONS = {401: "authError", 403: "forbidden", 429: "rateLimitExceeded", 500: "backendError",
           503: "backendError"}


def make_handler(state, validator, keys, doc):
    methods = {
        "aggregated": doc["resources"]["disks"]["methods"]["aggregatedList"],
        "zones": doc["resources"]["disks"]["methods"]["list"],
        "regions": doc["resources"]["regionDisks"]["methods"]["list"],
        "snapshots": doc["resources"]["snapshots"]["methods"]["list"],
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # one line per request on stderr
            sys.stderr.write("fake-gce-compute: " + (fmt % args) + "\n")

        def send_json(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def send_valid(self, schema, body):
            try:
                validator.check(body, schema)
            except SchemaError as e:
                sys.stderr.write(f"fake-gce-compute: BUG: response is not a valid {schema}: {e}\n")
                return self.send_json(500, google_error(
                    500, f"fake-gce-compute: response is not a valid {schema}: {e}", "backendError"))
            self.send_json(200, body)

        def authenticated(self):
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                self.send_json(401, google_error(401, "Request is missing required authentication credential.", "required"))
                return False
            try:
                keys.verify_jwt(auth[len("Bearer "):])
            except PermissionError as e:
                self.send_json(401, google_error(401, f"Invalid Credentials: {e}", "authError"))
                return False
            return True

        def do_GET(self):  # noqa: N802
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/_fake/requests":  # the tests' view: requests per path so far
                with state.lock:
                    return self.send_json(200, dict(state.requests))
            with state.lock:
                state.requests[url.path] = state.requests.get(url.path, 0) + 1
                try:
                    snap, broken = state.refresh(), None
                except (OSError, ValueError, KeyError, TypeError) as e:
                    snap, broken = None, f"fake-gce-compute: the state file cannot be read: {e!r}"
            if broken:
                sys.stderr.write(broken + "\n")
                return self.send_json(500, google_error(500, broken, "backendError"))
            m = re.fullmatch(r"/compute/v1/projects/([^/]+)/(?:aggregated/disks|(zones|regions)/([^/]+)/disks|global/(snapshots))",
                             url.path)
            if not m:
                return self.send_json(404, google_error(404, f"no such path {url.path}", "notFound"))
            if not self.authenticated():
                return
            project, kind, location = m.group(1), m.group(2), m.group(3)
            snapshots = m.group(4) is not None
            method = methods["snapshots" if snapshots else kind or "aggregated"]
            query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
            unknown = set(query) - set(method["parameters"]) - STANDARD_PARAMS
            if unknown:
                return self.send_json(400, google_error(400, f"unknown parameters {sorted(unknown)}", "invalidParameter"))
            if project != snap.project:
                permission = "compute.snapshots.list" if snapshots else "compute.disks.list"
                return self.send_json(403, google_error(403, f"Required '{permission}' permission for 'projects/{project}'", "forbidden"))
            scope = "global/snapshots" if snapshots else f"{kind}/{location}" if kind else "aggregated"
            err = snap.errors.get(scope)
            if err and "delay" in err:
                # A slow answer, not an error: the listing goes on after it.
                time.sleep(float(err["delay"]))
                err = None
            if err:
                if "hang" in err:
                    time.sleep(float(err["hang"]))
                    return self.send_json(503, google_error(503, "hung", "backendError"))
                status = int(err["status"])
                return self.send_json(status, google_error(status, err.get("message", f"injected {status} for {scope}"), REASONS.get(status, "backendError")))
            try:
                if snapshots:
                    items, token = page_of(snap.snapshots, query)
                    body = {"kind": "compute#snapshotList",
                            "id": f"projects/{project}/global/snapshots",
                            "items": items,
                            "selfLink": f"{COMPUTE}/projects/{project}/global/snapshots"}
                    if not items:
                        del body["items"]
                    if token:
                        body["nextPageToken"] = token
                    return self.send_valid(method["response"]["$ref"], body)
                if kind:
                    if scope not in snap.disks:
                        return self.send_json(404, google_error(404, f"The resource 'projects/{project}/{scope}' was not found", "notFound"))
                    items, token = page_of(snap.disks[scope], query)
                    body = {"kind": "compute#diskList",
                            "id": f"projects/{project}/{scope}/disks",
                            "items": items,
                            "selfLink": f"{COMPUTE}/projects/{project}/{scope}/disks"}
                    if not items:
                        del body["items"]
                        body["warning"] = {"code": "NO_RESULTS_ON_PAGE",
                                           "message": "There are no results for scope '" + scope + "' on this page.",
                                           "data": [{"key": "scope", "value": scope}]}
                    if token:
                        body["nextPageToken"] = token
                    return self.send_valid(method["response"]["$ref"], body)
                flat = [(s, d) for s in snap.disks if s not in snap.unreachable
                        for d in snap.disks[s]]
                page, token = page_of(flat, query)
                items = {}
                for s in snap.disks:
                    on_page = [d for (ps, d) in page if ps == s]
                    if s in snap.unreachable:
                        items[s] = {"warning": {"code": "UNREACHABLE",
                                                "message": f"Scope '{s}' is unreachable.",
                                                "data": [{"key": "scope", "value": s}]}}
                    elif on_page:
                        items[s] = {"disks": on_page}
                    else:
                        items[s] = {"warning": {"code": "NO_RESULTS_ON_PAGE",
                                                "message": f"There are no results for scope '{s}' on this page.",
                                                "data": [{"key": "scope", "value": s}]}}
                body = {"kind": "compute#diskAggregatedList",
                        "id": f"projects/{project}/aggregated/disks",
                        "items": items,
                        "selfLink": f"{COMPUTE}/projects/{project}/aggregated/disks"}
                if token:
                    body["nextPageToken"] = token
                return self.send_valid(method["response"]["$ref"], body)
            except ValueError as e:
                return self.send_json(400, google_error(400, str(e), "invalid"))

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--discovery", required=True, help="compute.v1.json")
    ap.add_argument("--state")
    ap.add_argument("--write-keys", help="directory for key.json and foreign-key.json")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--validate", metavar="SCHEMA", help="validate stdin against SCHEMA and exit")
    a = ap.parse_args()
    doc = json.loads(pathlib.Path(a.discovery).read_text())
    validator = Validator(doc)
    if a.validate:
        try:
            validator.check(json.load(sys.stdin), a.validate)
        except SchemaError as e:
            print(f"invalid: {e}")
            sys.exit(1)
        print("valid")
        return
    if not a.state or not a.write_keys:
        ap.error("--state and --write-keys are required to serve")
    try:
        state = State(a.state)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    server = ThreadingHTTPServer(("127.0.0.1", a.port), None)
    server.daemon_threads = True
    keys = Keys(a.write_keys, server.server_port)
    server.RequestHandlerClass = make_handler(state, validator, keys, doc)
    # The test that started it may die without stopping it (SIGKILL): it exits with its parent.
    parent = os.getppid()

    def watchdog():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    print(f"listening {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
