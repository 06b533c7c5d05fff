#!/usr/bin/env python3
"""Writes a one-layer OCI image archive (an OCI image layout in a tar) holding one static
program, for `ctr -n k8s.io images import`. No image registry is reachable here, so the pod
sandbox (pause) image and the test workload are made this way. Reproducible: fixed mtimes and
owners, so the same program gives the same digests.

  oci-archive.py --name registry.k8s.io/pause:3.10.1 --program bin/pause --path /pause \
                 [--user 65535:65535] [--arg ...] --out pause.tar
"""
import argparse
import gzip
import hashlib
import io
import json
import tarfile


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode in entries:
            if data is None:
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                info.mode = mode
                t.addfile(info)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True, help="image reference, e.g. localhost/probe:1")
    p.add_argument("--program", required=True, help="static executable to put in the image")
    p.add_argument("--path", required=True, help="where it goes in the image, e.g. /pause")
    p.add_argument("--user", default="")
    p.add_argument("--arg", action="append", default=[])
    p.add_argument("--out", required=True)
    a = p.parse_args()

    with open(a.program, "rb") as f:
        program = f.read()
    layer = tar_bytes([(a.path.lstrip("/"), program, 0o755)])
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as g:
        g.write(layer)
    layer_gz = gz.getvalue()

    blobs = {}

    def blob(data):
        d = hashlib.sha256(data).hexdigest()
        blobs[d] = data
        return {"digest": "sha256:" + d, "size": len(data)}

    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": [a.path], "Cmd": a.arg or None, "User": a.user,
                   "Env": ["PATH=/"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "node/images/oci-archive.py " + a.path}],
    }
    if not a.arg:
        del config["config"]["Cmd"]
    cfg = blob(json.dumps(config, sort_keys=True).encode())
    lay = blob(layer_gz)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **lay}],
    }
    man = blob(json.dumps(manifest, sort_keys=True).encode())
    tag = a.name.rsplit(":", 1)[1] if ":" in a.name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", **man,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": a.name,
                            "org.opencontainers.image.ref.name": tag},
        }],
    }
    entries = [("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), 0o644),
               ("index.json", json.dumps(index, sort_keys=True).encode(), 0o644),
               ("blobs", None, 0o755), ("blobs/sha256", None, 0o755)]
    entries += [("blobs/sha256/" + d, data, 0o644) for d, data in sorted(blobs.items())]
    with open(a.out, "wb") as f:
        f.write(tar_bytes(entries))


if __name__ == "__main__":
    main()
