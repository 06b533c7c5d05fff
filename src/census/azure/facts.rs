//! What the Azure census reads of Resource Manager's answers: the few fields of a managed disk
//! and of a snapshot it uses, as `Microsoft.Compute` (api-version 2024-03-02) returns them,
//! and what the decisions read of each ([`DiskFacts`]).
//!
//! **Pure: no client, no clock.** No maintained Rust crate has the `Microsoft.Compute` types,
//! so the few needed are defined here, every field optional as serde reads it; what the
//! census cannot do without (a name, a size, a location) is checked here, and an answer
//! without it is a bad answer that fails its scope ([`AzureDisk::of`]). The shapes are proven
//! against Microsoft's published models: the tests' Resource Manager server validates every
//! answer it sends with the `azure-mgmt-compute` wheel's models (tests/fake-azure-arm).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::model::listing::{CreatedFor, DiskFacts};

/// The tag the Azure Disk CSI driver (and the in-tree plugin) puts on what it creates.
pub(crate) const CREATED_BY_TAG: &str = "k8s-azure-created-by";
/// The tag naming the PV a disk was created for ...
pub(crate) const CREATED_FOR_PV_NAME: &str = "kubernetes.io-created-for-pv-name";
/// ... the claim's name ...
pub(crate) const CREATED_FOR_PVC_NAME: &str = "kubernetes.io-created-for-pvc-name";
/// ... and the claim's namespace.
pub(crate) const CREATED_FOR_PVC_NAMESPACE: &str = "kubernetes.io-created-for-pvc-namespace";
/// The tag naming the VolumeSnapshot a snapshot was cut for (with csi-snapshotter's
/// `--extra-create-metadata`; the driver records no VolumeSnapshotContent) ...
pub(crate) const CREATED_FOR_SNAPSHOT_NAME: &str = "kubernetes.io-created-for-snapshot-name";
/// ... and its namespace.
pub(crate) const CREATED_FOR_SNAPSHOT_NAMESPACE: &str =
    "kubernetes.io-created-for-snapshot-namespace";
/// The tag naming the disk a snapshot was cut from (its resource id), always set.
pub(crate) const SOURCE_VOLUME_TAG: &str = "source_volume_id";

/// One page of a list (`DiskList`, `SnapshotList`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Page<T> {
    /// The page's items (required by the models).
    pub(crate) value: Vec<T>,
    /// The next page's URL; absent on the last page.
    #[serde(default)]
    pub(crate) next_link: Option<String>,
}

/// A `Disk` or a `Snapshot`, as far as the census reads them (unknown fields ignored).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ArmResource {
    /// The resource id.
    #[serde(default)]
    pub(crate) id: Option<String>,
    /// The name.
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// The region (`westeurope`): required by the models.
    #[serde(default)]
    pub(crate) location: Option<String>,
    /// The tags.
    #[serde(default)]
    pub(crate) tags: BTreeMap<String, String>,
    /// The VM it is attached to (a disk).
    #[serde(default)]
    pub(crate) managed_by: Option<String>,
    /// The VMs a shared disk is attached to.
    #[serde(default)]
    pub(crate) managed_by_extended: Vec<String>,
    /// `Premium_LRS`, `StandardSSD_ZRS`, ...
    #[serde(default)]
    pub(crate) sku: Option<Sku>,
    /// Its availability zone (`["1"]`), for a zonal disk.
    #[serde(default)]
    pub(crate) zones: Vec<String>,
    /// The properties.
    #[serde(default)]
    pub(crate) properties: Option<Properties>,
}

/// A disk's or snapshot's SKU.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Sku {
    /// Its name.
    #[serde(default)]
    pub(crate) name: Option<String>,
}

/// The properties the census reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Properties {
    /// The size in bytes (read-only, always returned).
    #[serde(default)]
    pub(crate) disk_size_bytes: Option<u64>,
    /// The size in GiB.
    #[serde(default, rename = "diskSizeGB")]
    pub(crate) disk_size_gb: Option<u64>,
    /// `Attached`, `Unattached`, `Reserved` (attached to a deallocated VM), `ActiveSAS`, ...
    #[serde(default)]
    pub(crate) disk_state: Option<String>,
    /// When it was created.
    #[serde(default)]
    pub(crate) time_created: Option<jiff::Timestamp>,
    /// Its unique id (a GUID).
    #[serde(default)]
    pub(crate) unique_id: Option<String>,
    /// When it was last attached or detached (capitalised so by the API).
    #[serde(default, rename = "LastOwnershipUpdateTime")]
    pub(crate) last_ownership_update: Option<jiff::Timestamp>,
    /// What it was created from.
    #[serde(default)]
    pub(crate) creation_data: Option<CreationData>,
}

/// What a disk or snapshot was created from.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreationData {
    /// The source disk's (or snapshot's) resource id.
    #[serde(default)]
    pub(crate) source_resource_id: Option<String>,
}

/// A managed disk or snapshot as the census keeps it: what it needs checked present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AzureDisk {
    /// Its name, lower-cased: how the census keys it (Azure names are case-insensitive).
    pub key: String,
    /// Its name as Resource Manager spells it.
    pub name: String,
    /// Its unique id (or its resource id, when the answer has none).
    pub id: String,
    /// Its region.
    pub location: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Its SKU's name.
    pub sku: Option<String>,
    /// Its zones (`1`).
    pub zones: Vec<String>,
    /// Its `diskState` (`None` for a snapshot).
    pub state: Option<String>,
    /// The VMs it is attached to, sorted.
    pub attached_to: Vec<String>,
    /// When it was created.
    pub created: Option<jiff::Timestamp>,
    /// When it was last attached or detached.
    pub ownership_changed: Option<jiff::Timestamp>,
    /// What it was created from (a snapshot's source disk).
    pub source: Option<String>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

impl AzureDisk {
    /// The disk or snapshot `r` says, or why the answer cannot be used: no name, no size, no
    /// location. `what` is `disk` or `snapshot`, for the line.
    pub(crate) fn of(r: ArmResource, what: &str) -> Result<AzureDisk, String> {
        let name = r
            .name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("a {what} without a name ({:?})", r.id))?;
        let p = r.properties.unwrap_or_default();
        let size_bytes = p
            .disk_size_bytes
            .filter(|b| *b > 0)
            .or_else(|| p.disk_size_gb.filter(|g| *g > 0).map(|g| g << 30))
            .ok_or_else(|| format!("{what} {name} has no size"))?;
        let location = r
            .location
            .filter(|l| !l.is_empty())
            .ok_or_else(|| format!("{what} {name} has no location"))?;
        let mut attached_to: Vec<String> = r
            .managed_by
            .into_iter()
            .chain(r.managed_by_extended)
            .filter(|m| !m.is_empty())
            .collect();
        attached_to.sort();
        attached_to.dedup();
        Ok(AzureDisk {
            key: name.to_ascii_lowercase(),
            id: p.unique_id.or(r.id).unwrap_or_default(),
            name,
            location,
            size_bytes,
            sku: r.sku.and_then(|s| s.name),
            zones: r.zones,
            state: p.disk_state,
            attached_to,
            created: p.time_created,
            ownership_changed: p.last_ownership_update,
            source: p.creation_data.and_then(|c| c.source_resource_id),
            tags: r.tags,
        })
    }

    /// What uses it: the VMs it is attached to; a state that says attached (or reserved by a
    /// deallocated VM, or open for an export) with no VM named says so itself. `Unattached`
    /// (or no state: a snapshot) is nothing.
    fn in_use(&self) -> Vec<String> {
        if !self.attached_to.is_empty() {
            return self.attached_to.clone();
        }
        match self.state.as_deref() {
            None | Some("Unattached") => Vec::new(),
            Some(state) => vec![format!("a VM or export (diskState {state})")],
        }
    }

    /// The tags that attribute it: the driver's, the created-for ones and the cluster tag.
    fn attributing_tags(&self, cluster_tag: Option<&str>) -> Vec<(String, String)> {
        self.tags
            .iter()
            .filter(|(k, _)| {
                k.starts_with("kubernetes.io-created-for-")
                    || k.as_str() == CREATED_BY_TAG
                    || Some(k.as_str()) == cluster_tag
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Whose it is: the cluster its `cluster_tag` names; in a node resource group, without
    /// that tag, `ours` (the group is this cluster's).
    fn cluster(&self, attribution: &Attribution) -> Option<String> {
        let tagged = attribution
            .cluster_tag
            .as_deref()
            .and_then(|t| self.tags.get(t))
            .filter(|v| !v.is_empty())
            .cloned();
        tagged.or_else(|| {
            attribution
                .node_resource_group
                .then(|| attribution.ours.clone())
                .flatten()
        })
    }
}

/// How a section attributes a disk to a cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attribution {
    /// The tag key naming a disk's cluster.
    pub cluster_tag: Option<String>,
    /// The resource groups are this cluster's own.
    pub node_resource_group: bool,
    /// This cluster's name (the section's, or the file's).
    pub ours: Option<String>,
}

/// What the decisions read of a disk.
pub(crate) fn disk_facts(d: &AzureDisk, attribution: &Attribution) -> DiskFacts {
    let created_for = created_for(
        &d.tags,
        Some(CREATED_FOR_PV_NAME),
        CREATED_FOR_PVC_NAME,
        CREATED_FOR_PVC_NAMESPACE,
    );
    DiskFacts {
        size: d.size_bytes,
        created: d.created,
        kind: d.sku.clone().filter(|s| !s.is_empty()),
        in_use: d.in_use(),
        // An unattached disk's last change of owner was its detach.
        last_detached: d.ownership_changed.filter(|_| d.in_use().is_empty()),
        created_for,
        cluster: d.cluster(attribution),
        replica_zones: Vec::new(),
        source_disk: None,
        // AKS's zone label: `westeurope-1`.
        zone: match &d.zones[..] {
            [z] => Some(format!("{}-{z}", d.location)),
            _ => None,
        },
        region: Some(d.location.clone()),
        tags: d.attributing_tags(attribution.cluster_tag.as_deref()),
    }
}

/// What the decisions read of a snapshot: its disk's size, its creation, the disk it was cut
/// from, the VolumeSnapshotContent (as `pv`) and VolumeSnapshot (as `pvc`) its tags name.
pub(crate) fn snapshot_facts(s: &AzureDisk, attribution: &Attribution) -> DiskFacts {
    let created_for = created_for(
        &s.tags,
        None,
        CREATED_FOR_SNAPSHOT_NAME,
        CREATED_FOR_SNAPSHOT_NAMESPACE,
    );
    DiskFacts {
        size: s.size_bytes,
        created: s.created,
        kind: None,
        in_use: Vec::new(),
        last_detached: None,
        created_for,
        cluster: s.cluster(attribution),
        replica_zones: Vec::new(),
        source_disk: s
            .source
            .clone()
            .or_else(|| s.tags.get(SOURCE_VOLUME_TAG).cloned()),
        zone: None,
        region: Some(s.location.clone()),
        tags: s.attributing_tags(attribution.cluster_tag.as_deref()),
    }
}

/// Whether the Azure Disk CSI driver (or the in-tree plugin) made it: its tag says so.
pub(crate) fn made_by_the_driver(d: &AzureDisk) -> bool {
    d.tags.contains_key(CREATED_BY_TAG)
}

/// What the driver's tags say it was created for: the PV (`pv`; a snapshot's driver names no
/// content) and the claim or VolumeSnapshot.
fn created_for(
    tags: &BTreeMap<String, String>,
    pv: Option<&str>,
    pvc: &str,
    namespace: &str,
) -> Option<CreatedFor> {
    let get = |k: &str| tags.get(k).filter(|v| !v.is_empty()).cloned();
    let c = CreatedFor {
        pv: pv.and_then(get),
        pvc: get(pvc),
        pvc_namespace: get(namespace),
    };
    (c.pv.is_some() || c.pvc.is_some() || c.pvc_namespace.is_some()).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::listing::Owner;

    fn arm(json: serde_json::Value) -> ArmResource {
        serde_json::from_value(json).unwrap()
    }

    fn csi_disk() -> serde_json::Value {
        serde_json::json!({
            "id": "/subscriptions/s/resourceGroups/MC_rg/providers/Microsoft.Compute/disks/PVC-1",
            "name": "PVC-1",
            "type": "Microsoft.Compute/disks",
            "location": "westeurope",
            "sku": {"name": "StandardSSD_LRS", "tier": "Standard"},
            "zones": ["1"],
            "tags": {
                "k8s-azure-created-by": "kubernetes-azure-dd",
                "kubernetes.io-created-for-pv-name": "pvc-1",
                "kubernetes.io-created-for-pvc-name": "data",
                "kubernetes.io-created-for-pvc-namespace": "shop",
                "team": "payments"
            },
            "properties": {
                "diskSizeGB": 10,
                "diskSizeBytes": 10737418240u64,
                "diskState": "Unattached",
                "timeCreated": "2026-01-01T00:00:00.1234567+00:00",
                "uniqueId": "0f0e0d0c-0000-0000-0000-000000000001",
                "provisioningState": "Succeeded",
                "LastOwnershipUpdateTime": "2026-01-02T00:00:00+00:00"
            }
        })
    }

    #[test]
    fn a_csi_disk_maps_to_the_neutral_facts() {
        let d = AzureDisk::of(arm(csi_disk()), "disk").unwrap();
        assert_eq!(d.key, "pvc-1", "keyed lower-cased");
        assert_eq!(d.name, "PVC-1");
        assert!(made_by_the_driver(&d));
        let f = disk_facts(&d, &Attribution::default());
        assert_eq!(f.size, 10 << 30);
        assert_eq!(f.kind.as_deref(), Some("StandardSSD_LRS"));
        assert_eq!(f.zone.as_deref(), Some("westeurope-1"));
        assert_eq!(f.region.as_deref(), Some("westeurope"));
        assert!(f.in_use.is_empty(), "Unattached");
        assert_eq!(
            f.last_detached,
            Some("2026-01-02T00:00:00Z".parse().unwrap()),
            "the last change of owner of an unattached disk"
        );
        assert_eq!(
            f.created_for,
            Some(CreatedFor {
                pv: Some("pvc-1".into()),
                pvc: Some("data".into()),
                pvc_namespace: Some("shop".into()),
            })
        );
        assert!(
            !f.tags.iter().any(|(k, _)| k == "team"),
            "only the attributing tags"
        );
        assert_eq!(
            f.owner(None),
            Owner::Ours,
            "recorded, and no name on either side"
        );
        assert_eq!(
            f.owner(Some("prod")),
            Owner::Unknown,
            "no tag names a cluster"
        );
    }

    #[test]
    fn attribution_by_tag_and_by_node_resource_group() {
        let mut j = csi_disk();
        j["tags"]["cluster"] = "other".into();
        let d = AzureDisk::of(arm(j), "disk").unwrap();
        let by_tag = Attribution {
            cluster_tag: Some("cluster".into()),
            node_resource_group: true,
            ours: Some("prod".into()),
        };
        let f = disk_facts(&d, &by_tag);
        assert_eq!(f.owner(Some("prod")), Owner::OtherCluster("other".into()));
        assert!(f.tags.iter().any(|(k, _)| k == "cluster"));

        let d = AzureDisk::of(arm(csi_disk()), "disk").unwrap();
        let f = disk_facts(&d, &by_tag);
        assert_eq!(
            f.owner(Some("prod")),
            Owner::Ours,
            "untagged in the cluster's node resource group"
        );
    }

    #[test]
    fn attached_reserved_and_shared_disks_are_in_use() {
        let mut j = csi_disk();
        j["managedBy"] =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-b"
                .into();
        j["managedByExtended"] = serde_json::json!([
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-a"
        ]);
        j["properties"]["diskState"] = "Attached".into();
        let f = disk_facts(
            &AzureDisk::of(arm(j), "disk").unwrap(),
            &Attribution::default(),
        );
        assert_eq!(f.in_use.len(), 2);
        assert_eq!(
            f.last_detached, None,
            "attached: its last change was an attach"
        );
        assert!(f.in_use[0].ends_with("vm-a"), "sorted");

        let mut j = csi_disk();
        j["properties"]["diskState"] = "Reserved".into();
        let f = disk_facts(
            &AzureDisk::of(arm(j), "disk").unwrap(),
            &Attribution::default(),
        );
        assert_eq!(f.in_use, ["a VM or export (diskState Reserved)"]);
    }

    #[test]
    fn an_answer_without_name_size_or_location_is_refused() {
        for (path, why) in [
            ("name", "without a name"),
            ("location", "has no location"),
            ("properties", "has no size"),
        ] {
            let mut j = csi_disk();
            j.as_object_mut().unwrap().remove(path);
            let e = AzureDisk::of(arm(j), "disk").unwrap_err();
            assert!(e.contains(why), "{path}: {e}");
        }
        let mut j = csi_disk();
        j["properties"]
            .as_object_mut()
            .unwrap()
            .remove("diskSizeBytes");
        let d = AzureDisk::of(arm(j), "disk").unwrap();
        assert_eq!(d.size_bytes, 10 << 30, "diskSizeGB serves");
    }

    #[test]
    fn a_snapshot_names_its_content_and_source() {
        let s = AzureDisk::of(
            arm(serde_json::json!({
                "name": "snapshot-1",
                "location": "westeurope",
                "tags": {
                    "k8s-azure-created-by": "kubernetes-azure-dd",
                    "source_volume_id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/pvc-1",
                    "kubernetes.io-created-for-snapshot-name": "nightly",
                    "kubernetes.io-created-for-snapshot-namespace": "shop"
                },
                "properties": {
                    "diskSizeGB": 10,
                    "timeCreated": "2026-01-01T00:00:00Z",
                    "creationData": {"createOption": "Copy"}
                }
            })),
            "snapshot",
        )
        .unwrap();
        let f = snapshot_facts(&s, &Attribution::default());
        assert!(f.in_use.is_empty());
        assert!(
            f.source_disk.as_deref().unwrap().ends_with("disks/pvc-1"),
            "the tag serves where creationData does not say"
        );
        assert_eq!(
            f.created_for,
            Some(CreatedFor {
                pv: None,
                pvc: Some("nightly".into()),
                pvc_namespace: Some("shop".into()),
            })
        );
    }
}
