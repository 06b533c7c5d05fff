//! In-memory benchmark of the operator's hot paths at cluster scale (no server):
//!
//!   cargo run --release --example scale -- [PVS]     (default 50000)
//!
//! Feeds synthetic PVs and claims through the same reflector stores, strip functions, reverse
//! index, classification and planning the controller uses, and prints time and memory per step.
//! Figures, not assertions: the README records them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeSpec,
    PersistentVolumeStatus,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use volume_leftovers::decide::classify::classify;
use volume_leftovers::decide::lookup::Claim;
use volume_leftovers::decide::plan::{Action, desired, plan};
use volume_leftovers::model::finding::Verdict;
use volume_leftovers::model::leftover::{Keep, Leftover};
use volume_leftovers::model::volume::{Volume, VolumeObject};
use volume_leftovers::run::controller::{StoreLookup, View};
use volume_leftovers::run::wiring::{ClaimMeta, strip_class};
use volume_leftovers::watch::index::RefIndex;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn meta(name: &str, ns: Option<&str>, uid: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(str::to_string),
        uid: Some(uid),
        resource_version: Some("123456789".into()),
        labels: Some([("app".to_string(), "db".to_string())].into()),
        annotations: Some(
            [(
                "pv.kubernetes.io/provisioned-by".to_string(),
                "rbd.csi.ceph.com".to_string(),
            )]
            .into(),
        ),
        // What a real object carries and the reflectors strip.
        managed_fields: Some(vec![ManagedFieldsEntry {
            manager: Some("kube-controller-manager".into()),
            operation: Some("Update".into()),
            ..ManagedFieldsEntry::default()
        }]),
        finalizers: Some(vec!["kubernetes.io/pv-protection".into()]),
        ..ObjectMeta::default()
    }
}

/// i % 20: 0-15 Bound and healthy, 16-17 Released with the claim deleted, 18 Released with the
/// claim re-created, 19 Failed.
fn volume(i: usize) -> PersistentVolume {
    let name = format!("pvc-{i:08x}-5e0c-4d0a-9a3e-7c1d2b3a4f5e");
    let kind = i % 20;
    let phase = match kind {
        0..=15 => "Bound",
        16..=18 => "Released",
        _ => "Failed",
    };
    PersistentVolume {
        metadata: meta(&name, None, format!("pv-uid-{i}")),
        spec: Some(PersistentVolumeSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            capacity: Some([("storage".to_string(), Quantity("20Gi".into()))].into()),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(format!("team-{}", i % 500)),
                name: Some(format!("data-{i}")),
                uid: Some(format!("claim-uid-{i}")),
                resource_version: Some("42".into()),
                ..ObjectReference::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: "rbd.csi.ceph.com".into(),
                volume_handle: format!("0001-0009-rook-ceph-0000000000000002-{i:08x}"),
                fs_type: Some("ext4".into()),
                volume_attributes: Some(BTreeMap::from([
                    ("clusterID".to_string(), "rook-ceph".to_string()),
                    ("pool".to_string(), "replicapool".to_string()),
                    ("imageName".to_string(), format!("csi-vol-{i:08x}")),
                    ("imageFeatures".to_string(), "layering".to_string()),
                    (
                        "storage.kubernetes.io/csiProvisionerIdentity".to_string(),
                        "1700000000000-8081-rbd.csi.ceph.com".to_string(),
                    ),
                ])),
                ..CSIPersistentVolumeSource::default()
            }),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            storage_class_name: Some(format!("class-{}", i % 3)),
            volume_mode: Some("Filesystem".into()),
            ..PersistentVolumeSpec::default()
        }),
        status: Some(PersistentVolumeStatus {
            phase: Some(phase.into()),
            last_phase_transition_time: Some(Time(jiff::Timestamp::UNIX_EPOCH)),
            ..PersistentVolumeStatus::default()
        }),
    }
}

fn claims(n: usize) -> impl Iterator<Item = ClaimMeta> {
    (0..n).filter_map(|i| {
        let uid = match i % 20 {
            0..=15 => format!("claim-uid-{i}"),
            18 => format!("new-claim-uid-{i}"),
            _ => return None,
        };
        Some(ClaimMeta::from(meta(
            &format!("data-{i}"),
            Some(&format!("team-{}", i % 500)),
            uid,
        )))
    })
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    println!(
        "volume-leftovers scale benchmark: {n} PVs, {} claims",
        claims(n).count()
    );

    // The wire form: what the watcher deserializes.
    let wire: Vec<Vec<u8>> = (0..n)
        .map(|i| serde_json::to_vec(&volume(i)).expect("serialize"))
        .collect();

    // For comparison: the same PVs held as k8s-openapi PersistentVolumes, metadata stripped.
    let base = live();
    let (full_store, mut full_w) = reflector::store::<PersistentVolume>();
    full_w.apply_watcher_event(&Event::Init);
    for w in &wire {
        let mut pv: PersistentVolume = serde_json::from_slice(w).expect("deserialize");
        pv.metadata.managed_fields = None;
        pv.metadata.annotations = None;
        pv.metadata.labels = None;
        full_w.apply_watcher_event(&Event::InitApply(pv));
    }
    full_w.apply_watcher_event(&Event::InitDone);
    let full_bytes = live() - base;
    drop((full_store, full_w));

    // PVs into the operator's reflector store (lean, stripped), then the reverse index, as at
    // InitDone.
    let base = live();
    let (pv_store, mut pv_w) = reflector::store::<Volume>();
    let exclusions = volume_leftovers::model::exclude::Exclusions::default();
    let t = Instant::now();
    pv_w.apply_watcher_event(&Event::Init);
    for w in &wire {
        let pv: VolumeObject = serde_json::from_slice(w).expect("deserialize");
        pv_w.apply_watcher_event(&Event::InitApply(Volume::read(pv, &exclusions)));
    }
    pv_w.apply_watcher_event(&Event::InitDone);
    let ingest_pvs = t.elapsed();
    let after_pvs = live();
    let t = Instant::now();
    let mut index = RefIndex::default();
    let state = pv_store.state();
    index.reset(state.iter().map(|p| p.as_ref()));
    drop(state);
    let index_time = t.elapsed();
    let after_index = live();

    let (claim_store, mut claim_w) = reflector::store::<Claim>();
    let t = Instant::now();
    claim_w.apply_watcher_event(&Event::Init);
    let mut claim_count = 0;
    for c in claims(n) {
        claim_w.apply_watcher_event(&Event::InitApply(Claim::of(&c)));
        claim_count += 1;
    }
    claim_w.apply_watcher_event(&Event::InitDone);
    let ingest_claims = t.elapsed();
    let after_claims = live();

    let (class_store, mut class_w) = reflector::store::<StorageClass>();
    class_w.apply_watcher_event(&Event::Init);
    for c in 0..3 {
        let mut sc = StorageClass {
            metadata: meta(&format!("class-{c}"), None, format!("sc-{c}")),
            provisioner: "rbd.csi.ceph.com".into(),
            reclaim_policy: Some(if c == 2 { "Delete" } else { "Retain" }.into()),
            ..StorageClass::default()
        };
        strip_class(&mut sc);
        class_w.apply_watcher_event(&Event::InitApply(sc));
    }
    class_w.apply_watcher_event(&Event::InitDone);

    // A full sweep: classify every PV, plan every finding against nothing and against itself.
    let lookup = StoreLookup {
        claims: View::Current(&claim_store),
        classes: View::Current(&class_store),
        census: None,
    };
    let now = Time(jiff::Timestamp::UNIX_EPOCH);
    let state = pv_store.state();
    let t = Instant::now();
    let verdicts: Vec<Verdict> = state
        .iter()
        .map(|pv| classify(pv, &lookup, now.clone()))
        .collect();
    let classify_time = t.elapsed();
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    // Each finding's VolumeLeftover as the store keeps it (converted by the feed, not timed).
    let stored: Vec<Option<Leftover>> = verdicts
        .iter()
        .map(|v| match v {
            Verdict::Leftover(f) => {
                // As the API server returns it: with a generation (the status's
                // observedGeneration follows it).
                let mut o = desired(f, None, &now, &now, None);
                o.metadata.generation = Some(1);
                Some(Leftover::new(o, Keep::default()))
            }
            _ => None,
        })
        .collect();
    let t = Instant::now();
    let mut applies = 0;
    let mut nothing = 0;
    for ((pv, v), existing) in state.iter().zip(&verdicts).zip(&stored) {
        if let (Verdict::Leftover(f), Some(existing)) = (v, existing) {
            *by_reason.entry(f.status.reason.as_str()).or_default() += 1;
            let name = pv.metadata.name.as_deref().unwrap_or_default();
            if let Action::Create { .. } = plan(name, Some(v), None, &now, &now, None) {
                applies += 1;
            }
            if let Action::Nothing = plan(name, Some(v), Some(existing), &now, &now, None) {
                nothing += 1;
            }
        }
    }
    let plan_time = t.elapsed();

    // Claim events fan out through the index: one lookup each, not a scan of every PV.
    let t = Instant::now();
    let mut hits = 0usize;
    for c in claim_store.state() {
        hits += index.pvs_for_claim(&c.namespace, &c.name).count();
    }
    let fanout = t.elapsed();

    let per = |d: std::time::Duration, k: usize| d.as_nanos() as f64 / k.max(1) as f64 / 1000.0;
    println!(
        "deserialize + ingest {n} PVs:        {:>8.1} ms  ({:.2} µs/PV)",
        ingest_pvs.as_secs_f64() * 1e3,
        per(ingest_pvs, n)
    );
    println!(
        "reverse index (reset at InitDone):    {:>8.1} ms",
        index_time.as_secs_f64() * 1e3
    );
    println!(
        "ingest {claim_count} claims (metadata):     {:>8.1} ms",
        ingest_claims.as_secs_f64() * 1e3
    );
    println!(
        "classify every PV (one sweep):        {:>8.1} ms  ({:.2} µs/PV)",
        classify_time.as_secs_f64() * 1e3,
        per(classify_time, n)
    );
    println!(
        "plan {} findings twice (new, equal): {:>8.1} ms  (apply {applies}, nothing {nothing})",
        applies,
        plan_time.as_secs_f64() * 1e3
    );
    println!(
        "fan-out of {claim_count} claim events:     {:>8.1} ms  ({hits} PVs re-evaluated; a scan would compare {} pairs)",
        fanout.as_secs_f64() * 1e3,
        claim_count as u128 * n as u128
    );
    println!("findings by reason: {by_reason:?}");
    println!(
        "memory: the same PVs as k8s-openapi PersistentVolumes would take {:.1} MiB ({:.0} B/PV)",
        mib(full_bytes),
        full_bytes as f64 / n as f64
    );
    println!(
        "memory: PV store {:.1} MiB ({:.0} B/PV), index {:.1} MiB ({:.0} B/PV), claim store {:.1} MiB ({:.0} B/claim)",
        mib(after_pvs - base),
        (after_pvs - base) as f64 / n as f64,
        mib(after_index - after_pvs),
        (after_index - after_pvs) as f64 / n as f64,
        mib(after_claims - after_index),
        (after_claims - after_index) as f64 / claim_count.max(1) as f64
    );
}
