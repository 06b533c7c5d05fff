//! The commands `explain` prints for a Ceph RBD image: `rbd`'s, with the image spec
//! `pool/[namespace/]image` as the finding records it, as a Ceph user allowed to write (the
//! census's user is read-only). A ceph-csi snapshot's commands are the storage system's own.

use super::handle::{CSI_SNAPSHOT_PREFIX, parse_volume_handle};
use crate::model::backend::{DiskRecord, SnapshotRecord};

use crate::model::csi::RBD_CSI_DRIVER;
use crate::model::runbook::{
    Blanks, DiskRunbook, Line, PvSource, SnapshotAsk, SnapshotRunbook, ask,
    foreign_snapshot_delete, nonempty, quote, run, say,
};

/// An RBD image, as far as the finding says.
pub(super) struct Image {
    /// ceph-csi's cluster id.
    cluster_id: Option<String>,
    /// The pool's name.
    pool: Option<String>,
    /// The pool's id (a ceph-csi handle's), when its name is not known.
    pool_id: Option<i64>,
    /// The RADOS namespace, when not the default one.
    namespace: Option<String>,
    image: Option<String>,
    /// The CSI driver a PV for it names (the PV's, else ceph-csi's).
    driver: String,
    /// The PV's ceph-csi volume handle, whose image ceph-csi finds in the pool's journal.
    ceph_csi_handle: Option<String>,
}

impl Image {
    /// What the PV's source says, then the census's record, then the ceph-csi handle's ids.
    pub(super) fn of(disk: DiskRecord<'_>) -> Image {
        let src = disk.source;
        let key = disk.image;
        let csi = src.kind == "csi";
        let handle = src
            .volume_handle
            .as_deref()
            .and_then(|h| parse_volume_handle(h).ok());
        let pool =
            nonempty(src.pool.as_deref()).or_else(|| key.and_then(|k| nonempty(k.pool.as_deref())));
        Image {
            cluster_id: nonempty(src.cluster_id.as_deref())
                .or_else(|| key.and_then(|k| nonempty(k.cluster_id.as_deref())))
                .or_else(|| handle.as_ref().map(|h| h.cluster_id.clone())),
            pool_id: handle
                .as_ref()
                .map(|h| h.pool_id)
                .filter(|_| pool.is_none()),
            pool,
            namespace: nonempty(src.rados_namespace.as_deref())
                .or_else(|| key.and_then(|k| nonempty(k.rados_namespace.as_deref()))),
            image: disk
                .named
                .map(|r| r.name().to_string())
                .or_else(|| key.and_then(|i| nonempty(Some(&i.name)))),
            driver: match (csi, &src.driver) {
                (true, Some(d)) => d.clone(),
                _ => RBD_CSI_DRIVER.to_string(),
            },
            ceph_csi_handle: src
                .volume_handle
                .clone()
                .filter(|h| csi && parse_volume_handle(h).is_ok()),
        }
    }

    /// The image spec `pool/[namespace/]image`.
    fn spec(&self, blanks: &Blanks) -> String {
        let pool = blanks.or(self.pool.as_deref(), "pool");
        let image = blanks.or(self.image.as_deref(), "image");
        match &self.namespace {
            Some(ns) => format!("{pool}/{ns}/{image}"),
            None => format!("{pool}/{image}"),
        }
    }
}

impl DiskRunbook for Image {
    fn sentence(&self, via: &str) -> String {
        let mut at = format!(
            "the Ceph RBD image {} in pool {}",
            self.image.as_deref().unwrap_or("(not recorded)"),
            match (&self.pool, self.pool_id) {
                (Some(p), _) => p.clone(),
                (None, Some(id)) => format!("with id {id} (its name is not recorded)"),
                (None, None) => "(not recorded)".into(),
            }
        );
        if let Some(ns) = &self.namespace {
            at.push_str(&format!(", RADOS namespace {ns}"));
        }
        if let Some(c) = &self.cluster_id {
            at.push_str(&format!(", of the Ceph cluster ceph-csi calls {c}"));
        }
        format!("Disk: {at} ({via}).")
    }

    fn look(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!("rbd info {}", quote(&self.spec(blanks))))]
    }

    fn in_use(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!("rbd status {}", quote(&self.spec(blanks))))]
    }

    fn snapshot(&self, blanks: &Blanks, ask_for: SnapshotAsk<'_>) -> Vec<Line> {
        let snap = format!("{}@{}", self.spec(blanks), ask_for.name);
        vec![
            say(format!(
                "Snapshot the image{}, as a Ceph user allowed to write to the pool (the census's \
                 user is read-only):",
                self.cluster_id
                    .as_deref()
                    .map_or(String::new(), |c| format!(
                        " on the Ceph cluster ceph-csi calls {c}"
                    ))
            )),
            run(format!("rbd snap create {}", quote(&snap))),
            say(
                "An RBD snapshot lives in its image: it survives the trash below, not a purge. \
                 To keep the data past one, export it:",
            ),
            run(format!(
                "rbd export {} {}",
                quote(&snap),
                quote(&format!("{}.img", ask_for.finding))
            )),
        ]
    }

    fn delete(&self, blanks: &Blanks) -> Vec<Line> {
        let spec = self.spec(blanks);
        vec![
            say(
                "Move the image to the pool's trash (restorable with `rbd trash restore` until \
                 purged):",
            ),
            run(format!("rbd trash mv {}", quote(&spec))),
            say(
                "Or remove it for good (an image with snapshots cannot be removed: purge them \
                 first, the one above included):",
            ),
            run(format!("rbd snap purge {}", quote(&spec))),
            run(format!("rbd rm {}", quote(&spec))),
        ]
    }

    fn restore(&self, blanks: &Blanks, in_trash: bool) -> Vec<Line> {
        if !in_trash {
            return vec![say(
                "Restore the image, under the same pool and name, from your Ceph backups (an RBD \
                 image's snapshots went with it).",
            )];
        }
        let pool = match &self.namespace {
            Some(ns) => format!("{}/{ns}", blanks.or(self.pool.as_deref(), "pool")),
            None => blanks.or(self.pool.as_deref(), "pool"),
        };
        vec![
            say(format!(
                "It is in the pool's trash: find the id of {} there and restore it (under its \
                 name):",
                blanks.or(self.image.as_deref(), "image")
            )),
            run(format!("rbd trash ls --long {}", quote(&pool))),
            run(format!(
                "rbd trash restore {}",
                quote(&format!("{pool}/{}", ask("image id from the list")))
            )),
        ]
    }

    fn pv_source(&self, blanks: &Blanks) -> Option<PvSource> {
        let mut attributes = vec![(
            "clusterID",
            blanks.or(self.cluster_id.as_deref(), "clusterID"),
        )];
        attributes.push(("pool", blanks.or(self.pool.as_deref(), "pool")));
        if let Some(ns) = &self.namespace {
            attributes.push(("radosNamespace", ns.clone()));
        }
        let handle = match &self.ceph_csi_handle {
            // ceph-csi finds the image of its own handle in the pool's journal.
            Some(h) => {
                attributes.push(("imageName", blanks.or(self.image.as_deref(), "image")));
                h.clone()
            }
            // A static volume: the handle is the image's name.
            None => {
                attributes.push(("staticVolume", "true".into()));
                attributes.push(("imageFeatures", ask("image features, from rbd info")));
                blanks.or(self.image.as_deref(), "image")
            }
        };
        Some(PvSource {
            driver: self.driver.clone(),
            handle,
            attributes,
            affinity: None,
            node_stage_secret: true,
            notes: vec![say("ceph-csi needs the secrets its StorageClass named \
                 (csi.storage.k8s.io/node-stage-secret-name and -namespace): the record does not \
                 have them.")],
        })
    }
}

/// A ceph-csi snapshot: an RBD image of its own, deleted with the storage system's tools.
pub(super) struct Snapshot {
    handle: Option<String>,
    driver: Option<String>,
}

impl Snapshot {
    pub(super) fn of(snapshot: SnapshotRecord<'_>) -> Snapshot {
        Snapshot {
            handle: snapshot.handle.map(str::to_string),
            driver: snapshot.driver.map(str::to_string),
        }
    }
}

impl SnapshotRunbook for Snapshot {
    fn delete(&self, _blanks: &Blanks) -> Vec<Line> {
        // A ceph-csi snapshot handle names the image that holds the snapshot.
        let aside = self
            .handle
            .as_deref()
            .and_then(|h| parse_volume_handle(h).ok())
            .map_or(String::new(), |h| {
                format!(
                    " (ceph-csi: the image {} in the pool with id {} of the cluster it calls {})",
                    h.image_name_with_prefix(CSI_SNAPSHOT_PREFIX),
                    h.pool_id,
                    h.cluster_id
                )
            });
        vec![foreign_snapshot_delete(
            self.handle.as_deref(),
            self.driver.as_deref(),
            &aside,
        )]
    }
}
