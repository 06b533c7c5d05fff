"""The original one-shot tool of the project's seed (course notes 004, "the volume that survived
the claim"), assembled from its listings as they stand, as the oracle of the e2e tests: every row
it prints must have a VolumeLeftover and a `volume-leftovers scan` row that agree with it on its
seven keys. Not the project's code, and not changed to agree with it.

Usage: python leftovers.py   (KUBECONFIG selects the cluster and identity)
"""
import json
from dataclasses import dataclass
from typing import Optional

from kubernetes import client, config


def core() -> client.CoreV1Api:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.CoreV1Api()


@dataclass(frozen=True)
class Leftover:
    name: str
    phase: str
    reclaim: str
    claim_ns: Optional[str]
    claim_name: Optional[str]
    storage_class: Optional[str]
    capacity: Optional[str]
    claim_missing: bool


def leftovers(core_api: client.CoreV1Api) -> list[Leftover]:
    pvs = core_api.list_persistent_volume().items
    found = []
    for pv in pvs:
        ref = pv.spec.claim_ref
        claim_ns = ref.namespace if ref else None
        claim_name = ref.name if ref else None
        missing = False
        if claim_ns and claim_name:
            try:
                core_api.read_namespaced_persistent_volume_claim(
                    claim_name, claim_ns
                )
            except client.ApiException as exc:
                if exc.status == 404:
                    missing = True
                else:
                    raise
        cap = None
        if pv.spec.capacity:
            cap = str(pv.spec.capacity.get("storage"))
        found.append(
            Leftover(
                name=pv.metadata.name,
                phase=(pv.status.phase or ""),
                reclaim=(pv.spec.persistent_volume_reclaim_policy or ""),
                claim_ns=claim_ns,
                claim_name=claim_name,
                storage_class=pv.spec.storage_class_name,
                capacity=cap,
                claim_missing=missing,
            )
        )
    return found


def report(rows: list[Leftover]) -> None:
    for row in rows:
        if row.phase != "Released" and not row.claim_missing:
            continue
        print(json.dumps({
            "name": row.name,
            "phase": row.phase,
            "reclaim": row.reclaim,
            "claim": (
                f"{row.claim_ns}/{row.claim_name}"
                if row.claim_ns and row.claim_name
                else None
            ),
            "claim_missing": row.claim_missing,
            "storage_class": row.storage_class,
            "capacity": row.capacity,
        }))


if __name__ == "__main__":
    report(leftovers(core()))
