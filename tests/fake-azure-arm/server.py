#!/usr/bin/env python3
"""The project's own Azure Resource Manager test server: NOT Microsoft's, NOT an emulator.

No emulator of Azure Resource Manager (ARM) or of the Microsoft identity platform exists, so the
Azure managed-disk census tests talk to this small server instead. It serves the two read calls
the census makes, and the token endpoint its credentials call first:

    GET  /subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/disks?api-version=2024-03-02
    GET  /subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/snapshots?api-version=2024-03-02
    POST /TENANT/oauth2/v2.0/token                  (Microsoft identity platform v2, form body)
    GET  /msi/token?api-version=2019-08-01&resource=https://management.azure.com[&client_id=C]
                                                    (a managed identity's token endpoint)

ARM's path segments are case-insensitive (`resourcegroups`, `microsoft.compute`, the subscription
and the resource group's name in any case), and so are they here. `api-version` is required and
must be `2024-03-02` (absent: 400 `MissingApiVersionParameter`; another: 400
`InvalidApiVersionParameter`); the only other query parameter accepted is `$skiptoken` (any other
is 400 `InvalidQueryParameter` and a line on stderr: stricter than ARM, which ignores them, so
that a client sending what the census does not mean to goes noticed). A list answers pages of
`pageSize` items, `{"value": [...], "nextLink": "https://HOST:PORT/<same path>?api-version=
2024-03-02&$skiptoken=<opaque>"}` (HOST as the client sent it when it is 127.0.0.1 or
localhost), the last page without `nextLink`; an empty list is one page `{"value": []}`.

It cannot drift from the real API's shape unnoticed: **every list response it sends is validated
against Microsoft's own models of Compute API version 2024-03-02** (`DiskList`/`SnapshotList` of
`azure.mgmt.compute.v2024_03_02.models` in `azure-mgmt-compute` 34.1.0, installed by
scripts/azure-python.sh) by a STRICT walk of their msrest metadata (`_attribute_map`, with its
flattened `properties.x` keys, and `_validation`), much stricter than msrest's own lenient
deserialiser, which accepts anything:
  - a field no model declares is rejected, at every level (inside `properties` too);
  - `_validation`'s required fields must be present and not null (`value` of a list, `location`
    of a Disk/Snapshot, `properties.creationData.createOption`); readonly fields (`id`,
    `diskState`, `timeCreated`, `managedBy`, ...) are of course allowed: this is a response;
  - types: `str` a string, `int` an integer (not a bool, not "10"), `float` a number, `bool` a
    boolean, `[T]` an array, `{str}` an object of strings, models objects (walked again);
  - enums (the models type them `str`; their docstrings name the enum: DiskState, DiskCreateOption,
    DiskStorageAccountTypes, SnapshotStorageAccountTypes, NetworkAccessPolicy, ...) must be one of
    the enum's values, spelled as ARM spells them ("Unattached", not "unattached");
  - `iso-8601` strings must parse (msrest's own parser) and carry a UTC offset, as ARM's do
    ("2025-06-03T09:14:27.4591537+00:00");
  - null is accepted for a field that is not required (msrest reads it as absent).
A response that fails is not sent: the client gets a 500 `InternalServerError` whose message names
the violation (`$.value[0].properties.diskSizeGB: expected int, got str '10'`), and stderr a line.

Authentication runs for real, both ends. The token endpoint checks a request exactly as
azure_identity 1.0.0 sends it (client_secret_credential.rs, client_assertion_credential.rs, which
workload_identity_credential.rs wraps with the federated token file's text as the assertion):
`Content-Type: application/x-www-form-urlencoded`, a body of exactly
`client_id, client_secret, grant_type=client_credentials, scope` (ClientSecretCredential) or
exactly `client_assertion, client_assertion_type=urn:ietf:params:oauth:client-assertion-type:
jwt-bearer, client_id, grant_type=client_credentials, scope` (ClientAssertionCredential,
WorkloadIdentityCredential), each once, `scope` = `https://management.azure.com/.default`, no
query string. The answers are Entra's, in Entra's error format (`error`, `error_description`,
`error_codes`, `timestamp`, `trace_id`, `correlation_id`, `error_uri`):
  - the path's tenant is not the state's (case-insensitive): 400 `invalid_request` AADSTS90002;
  - a parameter missing: 400 `invalid_request` AADSTS900144; another parameter, a repeated one, a
    wrong content type or a query string: 400 `invalid_request` AADSTS90014 and a line on stderr;
  - `grant_type` not `client_credentials`: 400 `unsupported_grant_type` AADSTS70003;
  - `client_assertion_type` not jwt-bearer: 400 `invalid_request` AADSTS50027;
  - `scope` not ending `/.default`: 400 `invalid_scope` AADSTS1002012; another resource's
    `.default`: 400 `invalid_resource` AADSTS500011;
  - an unknown `client_id`: 400 `unauthorized_client` AADSTS700016;
  - a secret that is not the client's (or a secret sent for a client that has only a federated
    token): 401 `invalid_client` AADSTS7000215;
  - an assertion that is not the client's `federatedToken` (or one sent for a client that has
    only a secret): 401 `invalid_client` AADSTS700213;
  - otherwise 200 `{"token_type": "Bearer", "expires_in": N, "ext_expires_in": N,
    "access_token": "<random>"}`, N = `tokenLifetime`.
Every answer of the token endpoint waits `tokenDelay` seconds first. (azure_identity's token
cache refreshes a token that expires within 5 minutes, so a `tokenLifetime` under 300 makes it
fetch a new token for every request.) Each list request must carry `Authorization: Bearer
<token>` with a token this server issued that has not expired: no header, 401
`AuthenticationFailed`; not `Bearer ...`, 401 `AuthenticationFailed`; a token it never issued,
401 `InvalidAuthenticationToken`; an expired one, 401 `ExpiredAuthenticationToken` (ARM's code
for that case); each with ARM's `WWW-Authenticate: Bearer authorization_uri=...` header.

A managed identity's token comes from the endpoint of the host it runs on. IMDS's own address
(169.254.169.254) cannot be served on 127.0.0.1, so the server serves the same protocol in the
form azure_identity 1.0.0 reads from `IDENTITY_ENDPOINT` and `IDENTITY_HEADER` (its App Service
source, app_service_managed_identity_credential.rs, which sends its request through the same
imds_managed_identity_credential.rs as IMDS, with another api-version and secret header):
`GET /msi/token` with exactly `api-version=2019-08-01`, `resource=https://management.azure.com`
and at most one `client_id` (a user-assigned identity; none: the system-assigned one), headers
`metadata: true` and `x-identity-header` = the state's `managedIdentity.header`. Answers: a
missing or wrong secret header, 401 `{"statusCode": 401, "message": ...}`; another parameter or
api-version, or `metadata` missing, 400 and a line on stderr; another resource, 400; an identity
not assigned (a `client_id` not in `clientIds`, or none without `systemAssigned`), 400 (which
azure_identity reads as "The requested identity has not been assigned to this resource");
otherwise 200 `{"access_token", "expires_on": "<unix seconds, a string>", "resource",
"token_type": "Bearer", "client_id"}`, the token valid for ARM like the others. `tokenDelay`
applies; its requests are counted under `/msi/token`.

State (`--state FILE`, JSON):

    {"tenant": "t-1",                                        # the only tenant whose tokens it issues
     "clients": {"c-1": {"secret": "s3cret"},                 # ClientSecretCredential
                 "c-2": {"federatedToken": "<exact text>"}},  # WorkloadIdentityCredential's token file
     "managedIdentity": {"header": "h", "clientIds": ["m-1"], "systemAssigned": false},
     "tokenDelay": 0,        # seconds every token answer waits (default 0)
     "tokenLifetime": 3600,  # expires_in of the tokens it issues (default 3600)
     "pageSize": 100,        # items per page of every list (default 100)
     "subscriptions": {"<sub-id>": {"<resource-group>": {"disks": [...], "snapshots": [...]}}},
     "errors": {"<sub>/<rg>/disks": {"status": 403},
                "<sub>/<rg>/snapshots": {"status": 429, "retryAfter": 1, "times": 2},
                "<sub>/<rg2>/disks": {"hang": 30},          # sleep 30 s, then 503 ServerTimeout
                "<sub>/<rg3>/disks": {"delay": 4},          # sleep 4 s, then the normal answer
                "<sub>/<rg4>/disks": {"repeatNextLink": true},
                "<sub>/<rg5>/disks": {"unvalidated": true}}}

A resource group holds `disks` and `snapshots` (either may be left out: none), each a list of
Disk/Snapshot objects exactly as ARM returns them, except that the server fills in `id`
(`/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/disks/<name>`, sub and rg
spelled as in the state; `.../snapshots/<name>` for snapshots) and `type` (`Microsoft.Compute/
disks`, `Microsoft.Compute/snapshots`), replacing whatever the state has there. So an item
needs `name` and everything else ARM would send: `location`, `sku`, `zones`, `tags`,
`managedBy`, `properties` {`diskSizeGB`, `diskSizeBytes`, `diskState`, `timeCreated`,
`provisioningState`, `uniqueId`, `creationData` {`createOption`, `sourceResourceId`}, ...}.
`python3 server.py --print-example` prints a complete state with a disk and a snapshot as the
Azure Disk CSI driver makes them (the values real ARM sends for them, validated).

What the Azure Disk CSI driver (kubernetes-sigs/azuredisk-csi-driver, read at d983d613) tags:
  - disks (pkg/azuredisk/azure_managedDiskController.go CreateManagedDisk, constants in
    pkg/azureconstants/azure_constants.go, set in pkg/azureutils/azure_disk_utils.go
    ParseDiskParameters): `k8s-azure-created-by: kubernetes-azure-dd` always, and from the
    provisioner's --extra-create-metadata (on in AKS) `kubernetes.io-created-for-pv-name`,
    `kubernetes.io-created-for-pvc-name`, `kubernetes.io-created-for-pvc-namespace`; a disk's
    name is the PV's (`pvc-<claim uid>`);
  - snapshots (pkg/azuredisk/controllerserver.go CreateSnapshot):
    `k8s-azure-created-by: kubernetes-azure-dd` and `source_volume_id: <the source disk's id>`
    always, and from csi-snapshotter's --extra-create-metadata
    `kubernetes.io-created-for-snapshot-name`, `kubernetes.io-created-for-snapshot-namespace`
    (the VolumeSnapshot's); a snapshot's name is the VolumeSnapshotContent's
    (`snapshot-<VolumeSnapshot uid>`); `properties.creationData` is `createOption: Copy`,
    `sourceResourceId: <disk id>`, `incremental` true unless the class says otherwise.
  (Custom tags from a StorageClass's/VolumeSnapshotClass's `tags` parameter come on top.)

`errors` are keyed `<sub>/<rg>/disks` or `<sub>/<rg>/snapshots` (any case; the resource group
need not exist) and apply to every page of that list; an entry may combine keys:
  - `status`: answer that HTTP status with ARM's error body `{"error": {"code", "message"}}`:
    401 `InvalidAuthenticationToken`, 403 `AuthorizationFailed` ("The client '<client id>' with
    object id '<uuid>' does not have authorization to perform action
    'Microsoft.Compute/disks/read' over scope '/subscriptions/S/resourceGroups/RG' or the scope
    is invalid. ..."), 404 `ResourceGroupNotFound`, 429 `TooManyRequests` with `Retry-After:
    <retryAfter>` (default 1; `"retryAfter": null` sends none; with another status the header
    is sent only when `retryAfter` is given), 5xx `InternalServerError`, others `BadRequest`;
    `code` and `message` in the entry replace the defaults;
  - `hang`: sleep that many seconds, then 503 `ServerTimeout`;
  - `delay`: sleep that many seconds, then go on (the normal answer, or the entry's `status`);
  - `times`: N: only the first N requests to that list get `status`/`hang`/`delay`, later ones
    the normal answer (so that retries can be tested); without it, every request. The count
    starts when the entry first applies and again whenever the entry changes;
  - `repeatNextLink`: every page's `nextLink` (even the only page's) points at the first page
    again, the same URL each time: a client that follows it without checking never ends;
  - `unvalidated`: DELIBERATELY serve bad answers: the items exactly as in the state, no `id`/
    `type` filled in and no validation (the census's own checks of what it reads are tested
    with it; nothing else is).
The injected errors come after authentication (401s first) and before the lookup of the
subscription and resource group (an unknown subscription is 404 `SubscriptionNotFound`, an
unknown resource group 404 `ResourceGroupNotFound`), as with ARM's authorization.

`GET /_fake/requests` (not ARM's) answers how many requests each path has had so far, `{"<path,
lower-cased, without the query>": N}`, every token request counted under `/token`, so that tests
can count pages, retries and token fetches. `--validate MODEL` (DiskList, SnapshotList, or any
model of the module, e.g. Disk) validates a JSON body on stdin with the same strict validator and
exits 0 (printing `valid`) or 1 (the reason on stderr): the tests prove the validator fails.
Any other request (method or path) is answered 404 with a line on stderr naming it.

The state can change while the server runs, so that a test can delete a disk or make a list
hang mid-run: each request first reads the file again when its mtime, size or inode changed,
under the server's lock (a request sees one whole state, and every request counted after a
rewrite sees the new one). Write it whole (a new file renamed over the old one): a request that
reads a file that is not a valid state answers 500 naming why, and the next one reads it again.
Issued tokens and the `times` counts live in the server, not the file: a rewrite keeps them.

HTTPS only, as the real services (azure_identity refuses an `http://` authority host, azure_core
an `http://` endpoint): `--tls-dir DIR` makes, at start, with the openssl CLI, a throwaway CA
(`CA:TRUE`) and a server certificate it signs for `IP:127.0.0.1` and `DNS:localhost` (`CA:FALSE`,
`serverAuth`, in a SAN: rustls rejects a CA certificate used as a server's and a name only in
CN), and writes `DIR/ca.pem`, what the clients must trust, with the server's `DIR/server.pem`
and `DIR/server.key`. HTTP/1.1 (ALPN `http/1.1`), TLS 1.2 and later. Listens on 127.0.0.1 only
(`--port`, default 0: a free one); prints `listening PORT` on stdout when it accepts
connections; one line on stderr per request; exits when its parent (the test) does.

    python server.py --state state.json --tls-dir DIR [--port N]
    python server.py --validate DiskList < body.json
    python server.py --print-example
"""

import argparse
import base64
import copy
import json
import os
import pathlib
import re
import secrets
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_VERSION = "2024-03-02"
ARM_SCOPE = "https://management.azure.com/.default"
MSI_PATH = "/msi/token"
MSI_API_VERSION = "2019-08-01"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SECRET_PARAMS = {"client_id", "client_secret", "grant_type", "scope"}
ASSERTION_PARAMS = {"client_assertion", "client_assertion_type", "client_id", "grant_type", "scope"}
KINDS = {"disks": ("DiskList", "Microsoft.Compute/disks"),
         "snapshots": ("SnapshotList", "Microsoft.Compute/snapshots")}
LIST_PATH = re.compile(r"/subscriptions/([^/]+)/resourcegroups/([^/]+)/providers/microsoft\.compute/(disks|snapshots)",
                       re.IGNORECASE)
TOKEN_PATH = re.compile(r"/([^/]+)/oauth2/v2\.0/token")


def log(line):
    sys.stderr.write(f"fake-azure-arm: {line}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# Strict validation against the msrest models of azure-mgmt-compute


class SchemaError(Exception):
    pass


def _key_path(key):
    # msrest's flattened keys: "properties.diskSizeGB" is diskSizeGB inside properties; an
    # escaped dot ("a\\.b") is part of the name.
    return [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", key)]


class Validator:
    """Checks a JSON value against a model of `azure.mgmt.compute.v2024_03_02.models`, strictly
    (see the module's docstring): unknown fields rejected at every level, `_validation`'s
    `required` enforced, types, enum values and iso-8601 strings checked."""

    STRINGS = {"str", "duration", "date", "time", "rfc-1123", "base64", "bytearray", "decimal"}

    def __init__(self):
        try:
            from azure.mgmt.compute.v2024_03_02 import models
            from azure.mgmt.compute._serialization import Deserializer
        except ImportError as e:
            raise SystemExit(f"fake-azure-arm: {e}: run it with the Python scripts/azure-python.sh prints") from None
        self.models = models
        self.parse_iso = Deserializer.deserialize_iso
        self.trees = {}  # model name -> nested {field: subtree | (attr, type)}
        self.enums = {}  # (model name, attr) -> set of values

    def model(self, name):
        cls = getattr(self.models, name, None)
        if cls is None or not hasattr(cls, "_attribute_map"):
            raise SchemaError(f"no model {name!r} in azure.mgmt.compute.v2024_03_02.models")
        if name not in self.trees:
            tree = {}
            for attr, desc in cls._attribute_map.items():
                if desc["key"] == "":  # additional_properties: none of these models has them
                    raise SchemaError(f"{name}.{attr}: additional properties are not supported")
                node = tree
                parts = _key_path(desc["key"])
                for p in parts[:-1]:
                    node = node.setdefault(p, {})
                    if not isinstance(node, dict):
                        raise SchemaError(f"{name}: {desc['key']} nests in a field")
                node[parts[-1]] = (attr, desc["type"])
            for attr, rules in cls._validation.items():
                unknown = set(rules) - {"required", "readonly"}
                if unknown:  # a newer generator's constraints: fail rather than ignore them
                    raise SchemaError(f"{name}.{attr}: unsupported validation rules {sorted(unknown)}")
            # The enum a `str` field takes its values from is named only in the docstring
            # (`:vartype disk_state: str or ~azure.mgmt.compute.v2024_03_02.models.DiskState`,
            # wrapped anywhere).
            for attr, enum in re.findall(r":vartype (\w+):\s+str\s+or\s+~[\w.]+\.(\w+)\s*$",
                                         cls.__doc__ or "", re.MULTILINE):
                values = getattr(self.models, enum, None)
                if values is not None and not hasattr(values, "_attribute_map"):
                    self.enums[(name, attr)] = {v.value for v in values}
            self.trees[name] = tree
        return cls

    def check(self, value, model_name):
        self._model(value, model_name, "$")

    def _model(self, v, name, path):
        cls = self.model(name)
        if not isinstance(v, dict):
            raise SchemaError(f"{path}: expected an object ({name}), got {type(v).__name__} {v!r:.60}")
        for attr, rules in cls._validation.items():
            if rules.get("required"):
                key = cls._attribute_map[attr]["key"]
                node = v
                for p in _key_path(key):
                    node = node.get(p) if isinstance(node, dict) else None
                if node is None:
                    raise SchemaError(f"{path}.{key}: required ({name}.{attr}) but missing")
        self._fields(v, self.trees[name], name, path)

    def _fields(self, v, tree, name, path):
        for k, x in v.items():
            if k not in tree:
                raise SchemaError(f"{path}: unknown field {k!r} ({name} has {sorted(tree)})")
            sub = tree[k]
            if isinstance(sub, dict):  # a level of flattened keys ("properties")
                if x is None:
                    continue
                if not isinstance(x, dict):
                    raise SchemaError(f"{path}.{k}: expected an object, got {type(x).__name__} {x!r:.60}")
                self._fields(x, sub, name, f"{path}.{k}")
            else:
                attr, typ = sub
                self._value(x, typ, f"{path}.{k}", (name, attr))

    def _value(self, v, typ, path, field):
        if v is None:
            return
        if typ.startswith("[") and typ.endswith("]"):
            if not isinstance(v, list):
                raise SchemaError(f"{path}: expected an array, got {type(v).__name__} {v!r:.60}")
            for i, x in enumerate(v):
                self._value(x, typ[1:-1], f"{path}[{i}]", None)
        elif typ.startswith("{") and typ.endswith("}"):
            if not isinstance(v, dict):
                raise SchemaError(f"{path}: expected an object, got {type(v).__name__} {v!r:.60}")
            for k, x in v.items():
                self._value(x, typ[1:-1], f"{path}[{k!r}]", None)
        elif typ in ("int", "long"):
            if not isinstance(v, int) or isinstance(v, bool):
                raise SchemaError(f"{path}: expected int, got {type(v).__name__} {v!r}")
        elif typ == "float":
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise SchemaError(f"{path}: expected float, got {type(v).__name__} {v!r}")
        elif typ == "bool":
            if not isinstance(v, bool):
                raise SchemaError(f"{path}: expected bool, got {type(v).__name__} {v!r}")
        elif typ == "iso-8601":
            if not isinstance(v, str):
                raise SchemaError(f"{path}: expected an iso-8601 string, got {type(v).__name__} {v!r}")
            try:
                parsed = self.parse_iso(v)
            except Exception as e:  # noqa: BLE001  (msrest's DeserializationError)
                raise SchemaError(f"{path}: {v!r} is not iso-8601: {e}") from None
            if parsed.tzinfo is None:
                raise SchemaError(f"{path}: {v!r} has no UTC offset (ARM's times end in +00:00 or Z)")
        elif typ in self.STRINGS:
            if not isinstance(v, str):
                raise SchemaError(f"{path}: expected {typ}, got {type(v).__name__} {v!r}")
            values = self.enums.get(field) if field else None
            if values is not None and v not in values:
                raise SchemaError(f"{path}: {v!r} is not one of {sorted(values)}")
        elif typ == "object":
            pass
        else:
            self._model(v, typ, path)


# ---------------------------------------------------------------------------------------------
# TLS: a throwaway CA and a server certificate it signs, made with the openssl CLI

CA_CONF = """[req]
distinguished_name = dn
prompt = no
x509_extensions = ca
[dn]
CN = volume-leftovers fake-azure-arm test CA
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
"""

LEAF_EXT = """[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


def make_certs(out_dir):
    """DIR/ca.pem (trust this), DIR/server.pem and DIR/server.key; the CA's key is thrown away."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        t = pathlib.Path(tmp)
        (t / "ca.cnf").write_text(CA_CONF)
        (t / "leaf.cnf").write_text(LEAF_EXT)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

        def openssl(*args):
            r = subprocess.run(["openssl", *args], capture_output=True, text=True,
                               env={**os.environ, "OPENSSL_CONF": str(t / "ca.cnf")})
            if r.returncode != 0:
                raise SystemExit(f"fake-azure-arm: openssl {args[0]} failed: {r.stderr.strip()}")

        openssl("req", "-x509", "-config", str(t / "ca.cnf"), *ec, "-keyout", str(t / "ca.key"),
                "-out", str(t / "ca.pem"), "-days", "7", "-sha256")
        openssl("req", "-new", "-config", str(t / "ca.cnf"), *ec, "-keyout", str(t / "server.key"),
                "-out", str(t / "server.csr"), "-subj", "/CN=localhost")
        openssl("x509", "-req", "-in", str(t / "server.csr"), "-CA", str(t / "ca.pem"),
                "-CAkey", str(t / "ca.key"), "-set_serial", "0x" + secrets.token_hex(16),
                "-days", "7", "-sha256", "-extfile", str(t / "leaf.cnf"), "-extensions", "leaf",
                "-out", str(t / "server.pem"))
        for name in ("server.key", "server.pem", "ca.pem"):  # ca.pem last: it says "ready"
            os.chmod(t / name, 0o600 if name.endswith(".key") else 0o644)
            (t / name).replace(out / name)
    return out / "ca.pem", out / "server.pem", out / "server.key"


# ---------------------------------------------------------------------------------------------
# State


class StateReading:
    """One reading of the state file. ValueError when it is not a valid state."""

    def __init__(self, text):
        s = json.loads(text)
        if not isinstance(s, dict):
            raise ValueError("state: not an object")
        unknown = set(s) - {"tenant", "clients", "managedIdentity", "tokenDelay", "tokenLifetime",
                            "pageSize", "subscriptions", "errors"}
        if unknown:
            raise ValueError(f"state: unknown keys {sorted(unknown)}")
        self.tenant = s["tenant"]
        if not isinstance(self.tenant, str) or not self.tenant:
            raise ValueError("state: tenant must be a non-empty string")
        self.clients = {}
        for cid, c in s.get("clients", {}).items():
            if not isinstance(c, dict) or len(c) != 1 or not isinstance(
                    c.get("secret", c.get("federatedToken")), str):
                raise ValueError(f"state: client {cid!r} must be {{\"secret\": S}} or {{\"federatedToken\": T}}")
            self.clients[cid] = c
        mi = s.get("managedIdentity")
        if mi is not None and (not isinstance(mi, dict) or set(mi) - {"header", "clientIds", "systemAssigned"}
                               or not isinstance(mi.get("header"), str)
                               or not all(isinstance(c, str) for c in mi.get("clientIds", []))):
            raise ValueError('state: managedIdentity must be {"header": H, "clientIds": [...], "systemAssigned": B}')
        self.managed_identity = mi
        self.token_delay = float(s.get("tokenDelay", 0))
        self.token_lifetime = int(s.get("tokenLifetime", 3600))
        self.page_size = int(s.get("pageSize", 100))
        if self.page_size < 1:
            raise ValueError("state: pageSize must be at least 1")
        self.subscriptions = {}  # lower-case sub -> (sub, {lower-case rg -> (rg, {kind: [items]})})
        for sub, groups in s.get("subscriptions", {}).items():
            if not isinstance(groups, dict):
                raise ValueError(f"state: subscription {sub!r} must map resource groups")
            rgs = {}
            for rg, kinds in groups.items():
                if not isinstance(kinds, dict) or set(kinds) - set(KINDS):
                    raise ValueError(f"state: {sub}/{rg} must be {{\"disks\": [...], \"snapshots\": [...]}}")
                for k in KINDS:
                    if not isinstance(kinds.get(k, []), list):
                        raise ValueError(f"state: {sub}/{rg}/{k} must be a list")
                if rg.lower() in rgs:
                    raise ValueError(f"state: resource group {rg!r} twice in {sub} (names are case-insensitive)")
                rgs[rg.lower()] = (rg, {k: kinds.get(k, []) for k in KINDS})
            if sub.lower() in self.subscriptions:
                raise ValueError(f"state: subscription {sub!r} twice (ids are case-insensitive)")
            self.subscriptions[sub.lower()] = (sub, rgs)
        self.errors = {}
        for key, e in s.get("errors", {}).items():
            if not re.fullmatch(r"[^/]+/[^/]+/(disks|snapshots)", key, re.IGNORECASE):
                raise ValueError(f"state: errors key {key!r} is not <sub>/<rg>/disks or <sub>/<rg>/snapshots")
            bad = set(e) - {"status", "code", "message", "retryAfter", "times", "hang", "delay",
                            "repeatNextLink", "unvalidated"} if isinstance(e, dict) else {"(not an object)"}
            if bad:
                raise ValueError(f"state: errors[{key!r}]: unknown keys {sorted(bad)}")
            self.errors[key.lower()] = e


class State:
    """The state file's latest reading, the requests counted and the tokens issued."""

    def __init__(self, path):
        self.path = pathlib.Path(path)
        self.stamp = None  # (mtime, size, inode) of the file last read
        self.current = None
        self.requests = {}  # lower-cased path -> requests (GET /_fake/requests)
        self.tokens = {}  # access token -> (client id, expiry as time.time())
        self.applied = {}  # (errors key, the entry as JSON) -> requests it applied to ("times")
        self.lock = threading.Lock()
        self.refresh()

    def refresh(self):
        """The current state, the file read again when it changed. Call with the lock held."""
        st = self.path.stat()
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self.stamp:
            self.current = StateReading(self.path.read_text())
            self.stamp = stamp
        return self.current


def skiptoken(offset):
    return base64.urlsafe_b64encode(f"fake-arm:{offset}".encode()).decode().rstrip("=")


def offset_of(token):
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        n = int(text.removeprefix("fake-arm:")) if text.startswith("fake-arm:") else -1
    except Exception:  # noqa: BLE001
        n = -1
    if n < 0:
        raise ValueError(token)
    return n


def arm_error(code, message):
    return {"error": {"code": code, "message": message}}


def entra_error(error, aadsts, description):
    now = time.gmtime()
    trace, corr = str(uuid.uuid4()), str(uuid.uuid4())
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", now)
    return {"error": error,
            "error_description": f"AADSTS{aadsts}: {description} Trace ID: {trace} Correlation ID: {corr} Timestamp: {stamp}",
            "error_codes": [aadsts], "timestamp": stamp, "trace_id": trace, "correlation_id": corr,
            "error_uri": f"https://login.microsoftonline.com/error?code={aadsts}"}


STATUS_CODES = {400: "BadRequest", 401: "InvalidAuthenticationToken", 403: "AuthorizationFailed",
                404: "ResourceGroupNotFound", 409: "Conflict", 429: "TooManyRequests"}


def injected_message(status, client, sub, rg, kind):
    if status == 403:
        oid = uuid.uuid5(uuid.NAMESPACE_URL, f"fake-azure-arm:{client}")
        return (f"The client '{client}' with object id '{oid}' does not have authorization to perform action "
                f"'Microsoft.Compute/{kind}/read' over scope '/subscriptions/{sub}/resourceGroups/{rg}' "
                "or the scope is invalid. If access was recently granted, please refresh your credentials.")
    if status == 404:
        return f"Resource group '{rg}' could not be found."
    if status == 401:
        return "The access token is invalid."
    if status == 429:
        return ("The request is being throttled as the limit has been reached for operation type - Read. "
                "(fake-azure-arm: injected)")
    if status >= 500:
        return (f"Encountered internal server error. Diagnostic information: timestamp "
                f"'{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}', subscription id '{sub}', "
                f"tracking id '{uuid.uuid4()}'. (fake-azure-arm: injected {status})")
    return f"fake-azure-arm: injected {status} for {sub}/{rg}/{kind}"


# ---------------------------------------------------------------------------------------------
# The server


def make_handler(state, validator, port):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def version_string(self):
            return "fake-azure-arm"

        def log_message(self, fmt, *args):  # one line per request on stderr
            log(fmt % args)

        def send_json(self, status, body, headers=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-cache")
            self.send_header("x-ms-request-id", str(uuid.uuid4()))
            self.send_header("x-ms-correlation-request-id", str(uuid.uuid4()))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def count(self, key):
            with state.lock:
                state.requests[key] = state.requests.get(key, 0) + 1

        def read_body(self):
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self.close_connection = True
                return None
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def unexpected(self, why):
            log(f"UNEXPECTED request {self.command} {self.path}: {why}")
            self.send_json(404, arm_error("NotFound", f"fake-azure-arm: no such endpoint: {self.command} {self.path} ({why})"))

        def snapshot(self):
            """The current state, or None after answering 500 when the file is not valid."""
            with state.lock:
                try:
                    return state.refresh()
                except (OSError, ValueError, KeyError, TypeError) as e:
                    broken = f"the state file cannot be read: {e!r}"
            log(broken)
            self.send_json(500, arm_error("InternalServerError", f"fake-azure-arm: {broken}"))
            return None

        # -- methods no client of this server sends
        def do_PUT(self):  # noqa: N802
            self.read_body()
            self.count(urllib.parse.urlsplit(self.path).path.lower())
            self.unexpected("only GET (lists) and POST (tokens) are served")

        do_PATCH = do_DELETE = do_PUT  # noqa: N815

        def do_HEAD(self):  # noqa: N802
            self.count(urllib.parse.urlsplit(self.path).path.lower())
            log(f"UNEXPECTED request HEAD {self.path}")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_OPTIONS = do_HEAD  # noqa: N815

        # -- the token endpoint
        def do_POST(self):  # noqa: N802
            body = self.read_body()
            url = urllib.parse.urlsplit(self.path)
            m = TOKEN_PATH.fullmatch(url.path)
            if not m:
                self.count(url.path.lower())
                return self.unexpected("not a token endpoint (POST /TENANT/oauth2/v2.0/token)")
            self.count("/token")
            snap = self.snapshot()
            if snap is None:
                return
            if snap.token_delay > 0:
                time.sleep(snap.token_delay)
            status, answer = self.token(m.group(1), url, body, snap)
            self.send_json(status, answer)

        def token(self, tenant, url, body, snap):
            if tenant.lower() != snap.tenant.lower():
                return 400, entra_error("invalid_request", 90002,
                                        f"Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID "
                                        "and are signing into the correct cloud.")
            ctype = self.headers.get("Content-Type", "")
            if ctype != "application/x-www-form-urlencoded" or url.query or body is None:
                why = (f"Content-Type {ctype!r}" if ctype != "application/x-www-form-urlencoded"
                       else f"query string {url.query!r}" if url.query else "chunked body")
                log(f"UNEXPECTED token request: {why}")
                return 400, entra_error("invalid_request", 90014, f"fake-azure-arm: unexpected token request: {why}.")
            try:
                pairs = urllib.parse.parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=True)
            except (UnicodeDecodeError, ValueError) as e:
                log(f"UNEXPECTED token request: body is not a form: {e}")
                return 400, entra_error("invalid_request", 90014, f"fake-azure-arm: the body is not a form: {e}.")
            form = dict(pairs)
            names = [k for k, _ in pairs]
            shape = ASSERTION_PARAMS if "client_assertion" in form else SECRET_PARAMS
            extra = sorted(set(names) - shape) + sorted({k for k in names if names.count(k) > 1})
            if extra:
                log(f"UNEXPECTED token request: parameters {extra} (azure_identity 1.0.0 sends exactly {sorted(shape)})")
                return 400, entra_error("invalid_request", 90014,
                                        f"fake-azure-arm: unexpected or repeated parameters {extra}.")
            missing = sorted(shape - set(names))
            if missing:
                return 400, entra_error("invalid_request", 900144,
                                        f"The request body must contain the following parameter: '{missing[0]}'.")
            if form["grant_type"] != "client_credentials":
                return 400, entra_error("unsupported_grant_type", 70003,
                                        f"The app requested an unsupported grant type '{form['grant_type']}'.")
            if "client_assertion" in form and form["client_assertion_type"] != ASSERTION_TYPE:
                return 400, entra_error("invalid_request", 50027,
                                        f"Invalid client_assertion_type '{form['client_assertion_type']}'.")
            scope = form["scope"]
            if not scope.endswith("/.default") or " " in scope:
                return 400, entra_error("invalid_scope", 1002012,
                                        f"The provided value for scope {scope} is not valid. Client credential flows must "
                                        "have a scope value with /.default suffixed to the resource identifier "
                                        "(application ID URI).")
            if scope != ARM_SCOPE:
                return 400, entra_error("invalid_resource", 500011,
                                        f"The resource principal named {scope.removesuffix('/.default')} was not found "
                                        f"in the tenant named {snap.tenant}. (fake-azure-arm issues tokens for "
                                        f"{ARM_SCOPE} only.)")
            cid = form["client_id"]
            client = snap.clients.get(cid)
            if client is None:
                return 400, entra_error("unauthorized_client", 700016,
                                        f"Application with identifier '{cid}' was not found in the directory "
                                        f"'{snap.tenant}'. This can happen if the application has not been installed "
                                        "by the administrator of the tenant or consented to by any user in the tenant. "
                                        "You may have sent your authentication request to the wrong tenant.")
            if "client_secret" in form:
                if client.get("secret") is None or not secrets.compare_digest(
                        form["client_secret"].encode(), client["secret"].encode()):
                    return 401, entra_error("invalid_client", 7000215,
                                            "Invalid client secret provided. Ensure the secret being sent in the request "
                                            "is the client secret value, not the client secret ID, for a secret added to "
                                            f"app '{cid}'.")
            elif client.get("federatedToken") is None or not secrets.compare_digest(
                    form["client_assertion"].encode(), client["federatedToken"].encode()):
                return 401, entra_error("invalid_client", 700213,
                                        "No matching federated identity record found for presented assertion subject "
                                        f"'{subject_of(form['client_assertion'])}'. Check your federated identity "
                                        "credential Subject, Audience and Issuer against the presented assertion.")
            token = secrets.token_urlsafe(32)
            with state.lock:
                now = time.time()
                state.tokens = {t: v for t, v in state.tokens.items() if v[1] > now - 3600}
                state.tokens[token] = (cid, now + snap.token_lifetime)
            return 200, {"token_type": "Bearer", "expires_in": snap.token_lifetime,
                         "ext_expires_in": snap.token_lifetime, "access_token": token}

        # -- a managed identity's token endpoint
        def managed_token(self, url):
            snap = self.snapshot()
            if snap is None:
                return
            if snap.token_delay > 0:
                time.sleep(snap.token_delay)
            status, answer = self.managed_answer(url, snap)
            self.send_json(status, answer)

        def managed_answer(self, url, snap):
            mi = snap.managed_identity
            if mi is None:
                return 400, {"statusCode": 400, "message": "fake-azure-arm: no managedIdentity in the state"}
            given = self.headers.get("x-identity-header")
            if given is None or not secrets.compare_digest(given.encode(), mi["header"].encode()):
                return 401, {"statusCode": 401, "message": "The X-IDENTITY-HEADER is missing or not this host's."}
            pairs = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
            names = [k for k, _ in pairs]
            extra = sorted(set(names) - {"api-version", "resource", "client_id"}) + sorted(
                {k for k in names if names.count(k) > 1})
            if extra or self.headers.get("metadata") != "true":
                why = f"parameters {extra}" if extra else "no `metadata: true` header"
                log(f"UNEXPECTED managed identity token request: {why}")
                return 400, {"statusCode": 400, "message": f"fake-azure-arm: unexpected request: {why}"}
            q = dict(pairs)
            if q.get("api-version") != MSI_API_VERSION:
                log(f"UNEXPECTED managed identity api-version {q.get('api-version')!r}")
                return 400, {"statusCode": 400, "message": f"api-version must be {MSI_API_VERSION}"}
            resource = q.get("resource")
            if resource != ARM_SCOPE.removesuffix("/.default"):
                return 400, {"statusCode": 400,
                             "message": f"fake-azure-arm issues tokens for {ARM_SCOPE.removesuffix('/.default')} only, "
                                        f"not {resource!r}"}
            cid = q.get("client_id")
            assigned = cid in mi.get("clientIds", []) if cid is not None else mi.get("systemAssigned", False)
            if not assigned:
                return 400, {"statusCode": 400,
                             "message": f"No managed identity {'with client id ' + cid if cid else '(system-assigned)'} "
                                        "is assigned to this resource."}
            token = secrets.token_urlsafe(32)
            who = cid or "system-assigned"
            with state.lock:
                now = time.time()
                state.tokens = {t: v for t, v in state.tokens.items() if v[1] > now - 3600}
                state.tokens[token] = (who, now + snap.token_lifetime)
            return 200, {"access_token": token, "expires_on": str(int(now + snap.token_lifetime)),
                         "resource": resource, "token_type": "Bearer", "client_id": who}

        # -- ARM
        def do_GET(self):  # noqa: N802
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/_fake/requests":  # the tests' view: requests per path so far
                with state.lock:
                    counts = dict(state.requests)
                return self.send_json(200, counts)
            self.count(url.path.lower())
            if url.path == MSI_PATH:
                return self.managed_token(url)
            m = LIST_PATH.fullmatch(url.path)
            if not m:
                return self.unexpected("not a disks or snapshots list of a resource group")
            snap = self.snapshot()
            if snap is None:
                return
            client = self.authenticate(snap)
            if client is None:
                return
            sub, rg, kind = (urllib.parse.unquote(g) for g in m.groups())
            kind = kind.lower()
            query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
            versions = query.pop("api-version", [])
            if not versions:
                return self.send_json(400, arm_error("MissingApiVersionParameter",
                                                     "The api-version query parameter (?api-version=) is required for all requests."))
            if versions != [API_VERSION]:
                return self.send_json(400, arm_error("InvalidApiVersionParameter",
                                                     f"The api-version '{','.join(versions)}' is invalid. The supported "
                                                     f"versions are '{API_VERSION}' (fake-azure-arm serves no other)."))
            tokens = query.pop("$skiptoken", [])
            if query or len(tokens) > 1:
                log(f"UNEXPECTED query parameters {sorted(query) or ['$skiptoken twice']} in {self.path}")
                return self.send_json(400, arm_error("InvalidQueryParameter",
                                                     f"fake-azure-arm: unexpected query parameters {sorted(query)} "
                                                     "(only api-version and $skiptoken)."))
            try:
                start = offset_of(tokens[0]) if tokens else 0
            except ValueError:
                return self.send_json(400, arm_error("InvalidSkipToken", f"The skip token '{tokens[0]}' is invalid."))

            key = f"{sub}/{rg}/{kind}".lower()
            err = snap.errors.get(key) or {}
            if err and ("status" in err or "hang" in err or "delay" in err):
                with state.lock:
                    ident = (key, json.dumps(err, sort_keys=True))
                    n = state.applied.get(ident, 0)
                    state.applied[ident] = n + 1
                active = "times" not in err or n < int(err["times"])
                if active:
                    if "delay" in err:
                        time.sleep(float(err["delay"]))
                    if "hang" in err:
                        time.sleep(float(err["hang"]))
                        return self.send_json(503, arm_error(
                            "ServerTimeout", f"The request timed out. (fake-azure-arm: hung {err['hang']} s)"))
                    if "status" in err:
                        return self.injected(err, client, sub, rg, kind)

            subscription = snap.subscriptions.get(sub.lower())
            if subscription is None:
                return self.send_json(404, arm_error("SubscriptionNotFound", f"The subscription '{sub}' could not be found."))
            s_name, groups = subscription
            group = groups.get(rg.lower())
            if group is None:
                return self.send_json(404, arm_error("ResourceGroupNotFound", f"Resource group '{rg}' could not be found."))
            rg_name, lists = group
            items = lists[kind]
            page = items[start:start + snap.page_size]
            end = start + len(page)
            body = {"value": page}
            nxt = 0 if err.get("repeatNextLink") else end if end < len(items) else None
            if nxt is not None:
                body["nextLink"] = f"https://{self.host()}{url.path}?api-version={API_VERSION}&$skiptoken={skiptoken(nxt)}"
            if err.get("unvalidated"):
                log(f"serving {key} UNVALIDATED, as the state has it (errors[...].unvalidated)")
                return self.send_json(200, body)
            model, rtype = KINDS[kind]
            try:
                filled = []
                for i, item in enumerate(page):
                    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                        raise SchemaError(f"$.value[{i}]: the state's item has no name: {item!r:.80}")
                    item = copy.deepcopy(item)
                    item["id"] = f"/subscriptions/{s_name}/resourceGroups/{rg_name}/providers/{rtype}/{item['name']}"
                    item["type"] = rtype
                    filled.append(item)
                body["value"] = filled
                validator.check(body, model)
            except SchemaError as e:
                log(f"BUG: response is not a valid {model}: {e}")
                return self.send_json(500, arm_error("InternalServerError",
                                                     f"fake-azure-arm: response is not a valid {model}: {e}"))
            self.send_json(200, body)

        def host(self):
            h = self.headers.get("Host", "")
            return h if h in (f"127.0.0.1:{port}", f"localhost:{port}") else f"127.0.0.1:{port}"

        def authenticate(self, snap):
            """The client id the request's token was issued to; None after answering 401."""
            auth = self.headers.get("Authorization")
            challenge = [("WWW-Authenticate", f'Bearer authorization_uri="https://login.microsoftonline.com/{snap.tenant}", '
                          'error="invalid_token", error_description="The authentication failed."')]
            if auth is None:
                self.send_json(401, arm_error("AuthenticationFailed",
                                              "Authentication failed. The 'Authorization' header is missing."), challenge)
                return None
            if not auth.startswith("Bearer ") or not auth[7:].strip():
                self.send_json(401, arm_error("AuthenticationFailed",
                                              "Authentication failed. The 'Authorization' header is provided in an invalid format."),
                               challenge)
                return None
            with state.lock:
                issued = state.tokens.get(auth[7:].strip())
            if issued is None:
                self.send_json(401, arm_error("InvalidAuthenticationToken",
                                              "The access token is invalid. (fake-azure-arm did not issue it)"), challenge)
                return None
            client, expiry = issued
            now = time.time()
            if expiry <= now:
                fmt = "%m/%d/%Y %H:%M:%S"
                self.send_json(401, arm_error("ExpiredAuthenticationToken",
                                              f"The access token expiry UTC time '{time.strftime(fmt, time.gmtime(expiry))}' "
                                              f"is earlier than current UTC time '{time.strftime(fmt, time.gmtime(now))}'."),
                               challenge)
                return None
            return client

        def injected(self, err, client, sub, rg, kind):
            status = int(err["status"])
            code = err.get("code") or ("InternalServerError" if status >= 500 else STATUS_CODES.get(status, "BadRequest"))
            message = err.get("message") or injected_message(status, client, sub, rg, kind)
            headers = []
            retry = err.get("retryAfter", 1 if status == 429 else None)
            if retry is not None:
                headers.append(("Retry-After", str(retry)))
            return self.send_json(status, arm_error(code, message), headers)

    return Handler


def subject_of(assertion):
    """The `sub` of an assertion that is a JWT (a Kubernetes service-account token), for the
    error message as Entra words it."""
    try:
        part = assertion.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))).get("sub", "?")
    except Exception:  # noqa: BLE001
        return "(not a JWT)"


class TLSServer(ThreadingHTTPServer):
    """HTTPS: the TLS handshake runs in the connection's own thread, so that a client that
    connects and says nothing holds up no one else."""

    daemon_threads = True

    def __init__(self, address, context):
        super().__init__(address, BaseHTTPRequestHandler)
        self.context = context

    def finish_request(self, request, client_address):
        request.settimeout(30)
        try:
            conn = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            log(f"TLS handshake with {client_address[0]}:{client_address[1]} failed: {e}")
            return
        conn.settimeout(None)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        log(f"connection from {client_address[0]}:{client_address[1]}: {sys.exc_info()[1]!r}")


# ---------------------------------------------------------------------------------------------
# A realistic example (--print-example): what ARM returns for a disk and a snapshot the Azure
# Disk CSI driver made, as this server's state.

SUB = "00000000-0000-0000-0000-00000000a0b1"
RG = "MC_rg-volume-leftovers_aks-1_westeurope"
NODE = (f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/"
        "aks-nodepool1-31415926-vmss/virtualMachines/aks-nodepool1-31415926-vmss_0")
DISK = "pvc-4b0e3f5c-2a7d-4c1e-9f3a-6d8b2e1c0a97"
EXAMPLE = {
    "tenant": "72f988bf-0000-0000-0000-00000000feed",
    "clients": {"11111111-2222-3333-4444-555555555555": {"secret": "s3cret"},
                "66666666-7777-8888-9999-000000000000": {"federatedToken": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"}},
    "tokenDelay": 0,
    "tokenLifetime": 3600,
    "pageSize": 100,
    "subscriptions": {SUB: {RG: {
        "disks": [{
            "name": DISK,
            "location": "westeurope",
            "zones": ["1"],
            "managedBy": NODE,
            "sku": {"name": "StandardSSD_LRS", "tier": "Standard"},
            "tags": {"k8s-azure-created-by": "kubernetes-azure-dd",
                     "kubernetes.io-created-for-pv-name": DISK,
                     "kubernetes.io-created-for-pvc-name": "data-postgres-0",
                     "kubernetes.io-created-for-pvc-namespace": "shop"},
            "properties": {
                "creationData": {"createOption": "Empty"},
                "diskSizeGB": 10,
                "diskIOPSReadWrite": 500,
                "diskMBpsReadWrite": 100,
                "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
                "networkAccessPolicy": "AllowAll",
                "publicNetworkAccess": "Enabled",
                "timeCreated": "2025-06-03T09:14:27.4591537+00:00",
                "provisioningState": "Succeeded",
                "diskState": "Attached",
                "diskSizeBytes": 10737418240,
                "uniqueId": "0d6a51f6-8f0e-4f0b-a3de-2c1b3e7d9a10",
                "LastOwnershipUpdateTime": "2025-06-03T09:15:02.1234567+00:00",
            },
        }, {
            "name": "pvc-9c2d7e18-5b3a-4f60-8e21-0a4c6b9d3f55",
            "location": "westeurope",
            "zones": ["2"],
            "sku": {"name": "Premium_LRS", "tier": "Premium"},
            "tags": {"k8s-azure-created-by": "kubernetes-azure-dd",
                     "kubernetes.io-created-for-pv-name": "pvc-9c2d7e18-5b3a-4f60-8e21-0a4c6b9d3f55",
                     "kubernetes.io-created-for-pvc-name": "cache-redis-1",
                     "kubernetes.io-created-for-pvc-namespace": "shop"},
            "properties": {
                "creationData": {"createOption": "Empty"},
                "diskSizeGB": 32,
                "diskIOPSReadWrite": 120,
                "diskMBpsReadWrite": 25,
                "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
                "networkAccessPolicy": "AllowAll",
                "publicNetworkAccess": "Enabled",
                "tier": "P4",
                "timeCreated": "2025-05-20T16:02:11.0045213+00:00",
                "provisioningState": "Succeeded",
                "diskState": "Unattached",
                "diskSizeBytes": 34359738368,
                "uniqueId": "7e1c2b9a-4d3f-4a8e-b6c0-5f2e9d8a1c34",
            },
        }],
        "snapshots": [{
            "name": "snapshot-1f7e2c4a-9b8d-4e3f-a5c6-0d2b7e9f4a13",
            "location": "westeurope",
            "sku": {"name": "Standard_ZRS", "tier": "Standard"},
            "tags": {"k8s-azure-created-by": "kubernetes-azure-dd",
                     "source_volume_id": f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/disks/{DISK}",
                     "kubernetes.io-created-for-snapshot-name": "postgres-nightly",
                     "kubernetes.io-created-for-snapshot-namespace": "shop"},
            "properties": {
                "creationData": {"createOption": "Copy",
                                 "sourceResourceId": f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/disks/{DISK}",
                                 "sourceUniqueId": "0d6a51f6-8f0e-4f0b-a3de-2c1b3e7d9a10"},
                "diskSizeGB": 10,
                "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
                "incremental": True,
                "incrementalSnapshotFamilyId": "3b8f0e2d-6c1a-4d7e-9f25-8a0c4e6b2d91",
                "networkAccessPolicy": "AllowAll",
                "publicNetworkAccess": "Enabled",
                "timeCreated": "2025-06-04T01:00:05.7731208+00:00",
                "provisioningState": "Succeeded",
                "diskState": "Unattached",
                "diskSizeBytes": 10737418240,
                "uniqueId": "c4a9e3f1-2b7d-4e6a-8c05-9d1f3b7e2a68",
                "completionPercent": 100.0,
            },
        }],
    }}},
    "errors": {},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state", help="the state file (JSON, see the docstring)")
    ap.add_argument("--tls-dir", help="where to write ca.pem (trust it), server.pem, server.key")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--validate", metavar="MODEL", help="validate stdin against MODEL (DiskList, SnapshotList, ...) and exit")
    ap.add_argument("--print-example", action="store_true", help="print an example state and exit")
    a = ap.parse_args()
    if a.print_example:
        print(json.dumps(EXAMPLE, indent=2))
        return
    validator = Validator()
    if a.validate:
        try:
            body = json.load(sys.stdin)
            validator.check(body, a.validate)
        except (SchemaError, ValueError) as e:
            print(f"invalid: {e}", file=sys.stderr)
            sys.exit(1)
        print("valid")
        return
    if not a.state or not a.tls_dir:
        ap.error("--state and --tls-dir are required to serve")
    try:
        state = State(a.state)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"fake-azure-arm: {a.state}: {e!r}") from None
    _, cert, key = make_certs(a.tls_dir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    server = TLSServer(("127.0.0.1", a.port), ctx)
    server.RequestHandlerClass = make_handler(state, validator, server.server_port)
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
