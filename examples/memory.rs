//! Where the operator's bytes go, store by store (issue 10), in process, with a counting allocator:
//!
//!   cargo run --release --example memory -- [PVS] [LEFTOVERS]     (default 50000 10000)
//!
//! The issue's cluster (`examples/common/fleet.rs`: realistic Ceph RBD and GCE PD CSI volumes with
//! labels, annotations, finalizers and the managedFields of their provisioner and the PV
//! controller; claims bound to them; the leftovers' VolumeLeftovers as the operator writes them
//! and the API server returns them) is turned into list pages of JSON, and each page is read the
//! way the controller reads it: deserialized as kube-client does (`ObjectList<K>`), stripped by
//! the controller's own strip functions, applied to a kube-runtime reflector `Writer`, then
//! dropped. The reverse index and the loop's per-name memory are built as the controller builds
//! them.
//!
//! For every store it prints the live heap (bytes requested from the allocator) and an estimate
//! of what glibc malloc really holds for them (each block rounded up to its 16-byte chunk with its
//! 8-byte header, 32 bytes at least), split into the objects, the reflector's keys (`ObjectRef`:
//! the strings the lean forms give it, copied again) and the hash table; and the transient peak
//! of reading a list (page + buffer). Then the PVs in a leaner form still (a prototype: one flat
//! struct, no creation time, finalizers kept only while terminating, times as seconds, the source
//! as one string), a lower bound for what is left to gain in the PV store. Figures, not
//! assertions.

#[path = "common/fleet.rs"]
mod fleet;

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use fleet::Shape;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::ObjectList;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::watcher::Event;
use serde::de::DeserializeOwned;
use volume_leftovers::decide::classify::classify;
use volume_leftovers::decide::lookup::Claim;
use volume_leftovers::decide::name::Published;
use volume_leftovers::decide::plan::desired;
use volume_leftovers::engine::schedule::Limits;
use volume_leftovers::model::crd::VolumeLeftover;
use volume_leftovers::model::exclude::Exclusions;
use volume_leftovers::model::finding::Verdict;
use volume_leftovers::model::leftover::{Keep, Leftover, LeftoverObject};
use volume_leftovers::model::volume::{Volume, VolumeObject};
use volume_leftovers::run::controller::{StoreLookup, View};
use volume_leftovers::run::scheduling::Scheduler;
use volume_leftovers::run::wiring::{ClaimMeta, lean_leftover, strip_class};
use volume_leftovers::watch::index::RefIndex;

/// How the operator stripped a VolumeLeftover when its store kept the whole object (before the
/// lean form): managedFields and the last-applied annotation dropped.
fn strip_leftover(o: &mut VolumeLeftover) {
    o.metadata.managed_fields = None;
    if let Some(a) = o.metadata.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

// --- the counting allocator --------------------------------------------------------------------

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static CHUNK: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

/// What glibc malloc uses for a request of `size` bytes: the size plus its 8-byte header, rounded
/// up to 16, at least 32 (x86-64).
fn chunk(size: usize) -> isize {
    ((size + 8).div_ceil(16) * 16).max(32) as isize
}

fn grew(size: usize) {
    let now = LIVE.fetch_add(size as isize, Ordering::Relaxed) + size as isize;
    PEAK.fetch_max(now, Ordering::Relaxed);
    CHUNK.fetch_add(chunk(size), Ordering::Relaxed);
}

fn shrank(size: usize) {
    LIVE.fetch_sub(size as isize, Ordering::Relaxed);
    CHUNK.fetch_sub(chunk(size), Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        shrank(l.size());
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        shrank(l.size());
        grew(new);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Live heap: requested bytes, glibc chunk bytes, blocks.
#[derive(Clone, Copy, Debug, Default)]
struct Heap {
    live: isize,
    chunk: isize,
    blocks: isize,
}

impl Heap {
    fn now() -> Heap {
        Heap {
            live: LIVE.load(Ordering::Relaxed),
            chunk: CHUNK.load(Ordering::Relaxed),
            blocks: BLOCKS.load(Ordering::Relaxed),
        }
    }
    fn since(self, before: Heap) -> Heap {
        Heap {
            live: self.live - before.live,
            chunk: self.chunk - before.chunk,
            blocks: self.blocks - before.blocks,
        }
    }
    fn minus(self, o: Heap) -> Heap {
        self.since(o)
    }
    fn plus(self, o: Heap) -> Heap {
        Heap {
            live: self.live + o.live,
            chunk: self.chunk + o.chunk,
            blocks: self.blocks + o.blocks,
        }
    }
}

/// Runs `f`, keeping what it returns, and says how much heap it holds.
fn held<T>(f: impl FnOnce() -> T) -> (T, Heap) {
    let before = Heap::now();
    let v = f();
    (v, Heap::now().since(before))
}

fn reset_peak() -> isize {
    let now = LIVE.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn peak_since(base: isize) -> isize {
    PEAK.load(Ordering::Relaxed) - base
}

fn mib(b: isize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

// --- list pages ---------------------------------------------------------------------------------

const PAGE: usize = 500;

/// Time per object of each list read (deserialize, strip, store), on one thread as in the
/// controller's loop.
static INGEST: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The items as the API server pages them (500 per page), as JSON bytes.
fn pages(kind: &str, items: impl Iterator<Item = serde_json::Value>) -> Vec<Vec<u8>> {
    let items: Vec<serde_json::Value> = items.collect();
    items
        .chunks(PAGE)
        .enumerate()
        .map(|(n, chunk)| {
            serde_json::to_vec(&serde_json::json!({
                "apiVersion": "v1",
                "kind": kind,
                "metadata": {"resourceVersion": "5000000", "continue": format!("page-{n}")},
                "items": chunk,
            }))
            .expect("serialize")
        })
        .collect()
}

/// Reads every page into a reflector store the way `feed.rs` does (deserialize the page, strip
/// each object, `InitApply`, drop the page; `InitDone` swaps the buffer in). Returns the store,
/// what it holds, and the peak above the starting point while reading.
fn ingest<K, L>(
    pages: &[Vec<u8>],
    convert: impl Fn(K) -> L + Send + Sync + 'static,
) -> (Store<L>, reflector::store::Writer<L>, Heap, isize)
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Send + 'static,
    L: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let t = std::time::Instant::now();
    let before = Heap::now();
    let base = reset_peak();
    let (store, mut w) = reflector::store::<L>();
    w.apply_watcher_event(&Event::Init);
    for p in pages {
        let list: ObjectList<K> = serde_json::from_slice(p).expect("page");
        for o in list.items {
            let e = Event::InitApply(convert(o));
            w.apply_watcher_event(&e);
            // The feed yields nothing for InitApply: the event (and the object it owns) is dropped.
        }
    }
    w.apply_watcher_event(&Event::InitDone);
    let peak = peak_since(base);
    let n = store.len().max(1);
    INGEST.lock().unwrap().push(format!(
        "{} {:.1} µs",
        K::kind(&()),
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    ));
    (store, w, Heap::now().since(before), peak)
}

/// A store's objects and keys, measured apart: the objects (deep copies of what the store holds,
/// behind `Arc`s as there), the keys (`ObjectRef`s as the writer builds them), and the table as
/// the rest.
fn split<K>(store: &Store<K>, total: Heap) -> (Heap, Heap, Heap)
where
    K: Lookup<DynamicType = ()> + Clone + 'static,
{
    let state = store.state();
    let (objects, objects_heap) = held(|| {
        state
            .iter()
            .map(|o| Arc::new(K::clone(o)))
            .collect::<Vec<Arc<K>>>()
    });
    let (keys, keys_heap) = held(|| {
        state
            .iter()
            .map(|o| o.to_object_ref(()))
            .collect::<Vec<ObjectRef<K>>>()
    });
    // The two vectors' own buffers are not part of the store.
    let vecs = (std::mem::size_of::<Arc<K>>() * objects.capacity()
        + std::mem::size_of::<ObjectRef<K>>() * keys.capacity()) as isize;
    let objects_heap = objects_heap.minus(Heap {
        live: (std::mem::size_of::<Arc<K>>() * objects.capacity()) as isize,
        chunk: chunk(std::mem::size_of::<Arc<K>>() * objects.capacity()),
        blocks: 1,
    });
    // Keys live inline in the table: only their strings are separate blocks.
    let keys_strings = keys_heap.minus(Heap {
        live: (std::mem::size_of::<ObjectRef<K>>() * keys.capacity()) as isize,
        chunk: chunk(std::mem::size_of::<ObjectRef<K>>() * keys.capacity()),
        blocks: 1,
    });
    let _ = vecs;
    let table = total.minus(objects_heap).minus(keys_strings);
    drop((objects, keys, state));
    (objects_heap, keys_strings, table)
}

/// What `n` objects of `K` take inline behind their `Arc`s (no strings).
fn inline<K>(n: usize) -> Heap {
    let one = std::mem::size_of::<K>() + 16;
    Heap {
        live: (one * n) as isize,
        chunk: chunk(one) * n as isize,
        blocks: n as isize,
    }
}

struct Row {
    what: String,
    count: usize,
    heap: Heap,
}

fn row(what: impl Into<String>, count: usize, heap: Heap) -> Row {
    Row {
        what: what.into(),
        count,
        heap,
    }
}

fn print_rows(title: &str, rows: &[Row]) {
    println!("{title}");
    println!(
        "  {:<58} {:>8} {:>10} {:>9} {:>10} {:>9}",
        "", "objects", "live MiB", "live B/o", "malloc MiB", "malloc B/o"
    );
    for r in rows {
        let per = |b: isize| b as f64 / r.count.max(1) as f64;
        println!(
            "  {:<58} {:>8} {:>10.1} {:>9.0} {:>10.1} {:>9.0}",
            r.what,
            r.count,
            mib(r.heap.live),
            per(r.heap.live),
            mib(r.heap.chunk),
            per(r.heap.chunk)
        );
    }
}

// --- leaner representations, for the levers -----------------------------------------------------

/// Strings that repeat across objects, shared.
#[derive(Default)]
struct Interner(HashSet<Arc<str>>);

impl Interner {
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.0.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.0.insert(a.clone());
        a
    }
}

fn uid128(s: &str) -> u128 {
    u128::from_str_radix(&s.replace('-', ""), 16).unwrap_or(0)
}

/// A claimRef: namespace, name, uid, and the kind when it is not a claim.
type LeanClaimRef = (Arc<str>, Arc<str>, u128, Option<Arc<str>>);

/// A PV as classification and the VolumeLeftover need it, with repeated strings shared.
#[derive(Clone, Debug)]
#[allow(dead_code)]
struct LeanVolume {
    name: Arc<str>,
    uid: u128,
    terminating: Option<Box<[Arc<str>]>>,
    phase: Arc<str>,
    phase_since: Option<i64>,
    message: Option<Box<str>>,
    reclaim: Arc<str>,
    class: Option<Arc<str>>,
    claim: Option<LeanClaimRef>,
    capacity: Option<Arc<str>>,
    access_modes: Arc<str>,
    volume_mode: Arc<str>,
    source: Arc<str>,
    driver: Option<Arc<str>>,
    handle: Option<Box<str>>,
    pool: Option<Arc<str>>,
    image: Option<Box<str>>,
    excluded: bool,
}

impl Lookup for LeanVolume {
    type DynamicType = ();
    fn kind(_: &()) -> Cow<'_, str> {
        "PersistentVolume".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "persistentvolumes".into()
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

fn lean_volume(v: &Volume, i: &mut Interner) -> LeanVolume {
    let spec = v.spec.as_ref();
    let status = v.status.as_ref();
    let csi = spec.and_then(|s| s.csi.as_ref());
    let attrs = csi.and_then(|c| c.volume_attributes.as_ref());
    LeanVolume {
        name: Arc::from(v.metadata.name.as_deref().unwrap_or_default()),
        uid: uid128(
            &v.metadata
                .uid
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        ),
        terminating: v.metadata.deletion_timestamp.as_ref().map(|_| {
            v.metadata
                .finalizers
                .iter()
                .flat_map(|f| f.iter())
                .map(|f| i.get(f))
                .collect()
        }),
        phase: i.get(status.and_then(|s| s.phase.as_deref()).unwrap_or_default()),
        phase_since: status
            .and_then(|s| s.last_phase_transition_time.as_ref())
            .map(|t| t.0.as_second()),
        message: status.and_then(|s| s.message.as_deref()).map(Into::into),
        reclaim: i.get(
            spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                .unwrap_or_default(),
        ),
        class: spec
            .and_then(|s| s.storage_class_name.as_deref())
            .map(|c| i.get(c)),
        claim: spec.and_then(|s| s.claim_ref.as_ref()).map(|r| {
            (
                i.get(r.namespace.as_deref().unwrap_or_default()),
                Arc::from(r.name.as_deref().unwrap_or_default()),
                uid128(&r.uid.as_ref().map(ToString::to_string).unwrap_or_default()),
                r.kind
                    .as_deref()
                    .filter(|k| *k != "PersistentVolumeClaim")
                    .map(|k| i.get(k)),
            )
        }),
        capacity: spec
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.storage.as_ref())
            .map(|q| i.get(q)),
        access_modes: i.get(
            &spec
                .and_then(|s| s.access_modes.as_ref())
                .map(|m| m.iter().map(|a| a.as_ref()).collect::<Vec<_>>().join(","))
                .unwrap_or_default(),
        ),
        volume_mode: i.get(
            spec.and_then(|s| s.volume_mode.as_deref())
                .unwrap_or("Filesystem"),
        ),
        source: i.get(if csi.is_some() { "csi" } else { "other" }),
        driver: csi.map(|c| i.get(&c.driver)),
        handle: csi.map(|c| c.volume_handle.clone()),
        pool: attrs.and_then(|a| a.pool.as_deref()).map(|p| i.get(p)),
        image: attrs.and_then(|a| a.image_name.as_deref()).map(Into::into),
        excluded: v.excluded.is_some(),
    }
}

fn lean_store<K: Lookup<DynamicType = ()> + Clone + 'static>(
    items: impl Iterator<Item = K>,
) -> (Store<K>, reflector::store::Writer<K>) {
    let (s, mut w) = reflector::store::<K>();
    w.apply_watcher_event(&Event::Init);
    for o in items {
        w.apply_watcher_event(&Event::InitApply(o));
    }
    w.apply_watcher_event(&Event::InitDone);
    (s, w)
}

// --- main -----------------------------------------------------------------------------------------

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let shape = Shape {
        pvs: arg(1, Shape::ISSUE.pvs),
        leftovers: arg(2, Shape::ISSUE.leftovers),
    };
    let claims_n = shape.claims();
    println!(
        "volume-leftovers memory benchmark: {} PVs, {} claims, {} leftovers (realistic CSI objects, examples/common/fleet.rs)",
        shape.pvs, claims_n, shape.leftovers
    );
    println!(
        "inline sizes: Volume {} B (k8s-openapi ObjectMeta alone {} B), Claim {} B, Leftover {} B (VolumeLeftover {} B), ObjectRef {} B",
        std::mem::size_of::<Volume>(),
        std::mem::size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(),
        std::mem::size_of::<Claim>(),
        std::mem::size_of::<Leftover>(),
        std::mem::size_of::<VolumeLeftover>(),
        std::mem::size_of::<ObjectRef<Volume>>(),
    );

    // The wire.
    let pv_pages = pages(
        "PersistentVolumeList",
        (0..shape.pvs).map(|i| fleet::served_volume(&shape, i)),
    );
    let claim_indices: Vec<usize> = (0..shape.pvs).filter(|i| !shape.is_leftover(*i)).collect();
    let claim_pages = pages(
        "PartialObjectMetadataList",
        claim_indices
            .iter()
            .map(|i| fleet::served_claim_meta(&shape, *i)),
    );
    let class_pages = pages(
        "StorageClassList",
        fleet::classes().into_iter().map(|c| {
            let v = serde_json::to_value(&c).unwrap();
            fleet::served(
                v.clone(),
                &fleet::uuid(6, 0),
                1,
                &[("kubectl", "Update", None, v)],
            )
        }),
    );
    let wire =
        |p: &[Vec<u8>], n: usize| p.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1) as f64;
    println!(
        "wire (JSON as listed): {:.0} B/PV, {:.0} B/claim (metadata-only list)",
        wire(&pv_pages, shape.pvs),
        wire(&claim_pages, claims_n)
    );

    // PVs.
    let exclusions = Exclusions::default();
    let (pv_store, _pv_w, pv_total, pv_peak) =
        ingest::<VolumeObject, Volume>(&pv_pages, move |v| Volume::read(v, &exclusions));
    let (pv_obj, pv_keys, pv_table) = split(&pv_store, pv_total);

    // The parts of a stored PV.
    let state = pv_store.state();
    let (_m, pv_meta) = held(|| state.iter().map(|v| v.metadata.clone()).collect::<Vec<_>>());
    let (_s, pv_spec) = held(|| state.iter().map(|v| v.spec.clone()).collect::<Vec<_>>());
    let (_t, pv_status) = held(|| state.iter().map(|v| v.status.clone()).collect::<Vec<_>>());
    let vec_of = |size: usize| Heap {
        live: (size * state.len()) as isize,
        chunk: chunk(size * state.len()),
        blocks: 1,
    };
    let pv_meta = pv_meta.minus(vec_of(std::mem::size_of::<
        volume_leftovers::model::volume::VolumeMeta,
    >()));
    let pv_spec = pv_spec.minus(vec_of(std::mem::size_of::<
        Option<volume_leftovers::model::volume::VolumeSpec>,
    >()));
    let pv_status = pv_status.minus(vec_of(std::mem::size_of::<
        Option<volume_leftovers::model::volume::VolumeStatus>,
    >()));
    drop((_m, _s, _t, state));

    // Claims (metadata, and the expansion only while a request exceeds its capacity).
    let (claim_store, _claim_w, claim_total, claim_peak) =
        ingest::<ClaimMeta, Claim>(&claim_pages, |c| Claim::of(&c));
    let (claim_obj, claim_keys, claim_table) = split(&claim_store, claim_total);

    // Classes.
    let (class_store, _class_w, class_total, _) =
        ingest::<StorageClass, StorageClass>(&class_pages, |mut c| {
            strip_class(&mut c);
            c
        });

    // The reverse index, as at InitDone.
    let state = pv_store.state();
    let (index, index_heap) = held(|| {
        let mut index = RefIndex::default();
        index.reset(state.iter().map(|p| p.as_ref()));
        index
    });
    drop(state);

    // The VolumeLeftovers the operator writes for the findings, as the API server returns them.
    let lookup = StoreLookup {
        claims: View::Current(&claim_store),
        classes: View::Current(&class_store),
        census: None,
    };
    let now = Time(jiff::Timestamp::from_second(1_750_000_000).unwrap());
    let mut vls = Vec::new();
    for pv in pv_store.state() {
        if let v @ Verdict::Leftover(_) = classify(&pv, &lookup, now.clone()) {
            let Verdict::Leftover(f) = &v else {
                unreachable!()
            };
            let o = desired(f, None, &now, &now, None);
            let v = serde_json::to_value(&o).unwrap();
            let meta_fields = serde_json::json!({"metadata": {
                "labels": v["metadata"]["labels"].clone(),
                "ownerReferences": v["metadata"]["ownerReferences"].clone(),
            }, "spec": v["spec"].clone()});
            let mut served = fleet::served(
                v.clone(),
                &fleet::uuid(7, vls.len()),
                3_000_000 + vls.len() as u64,
                &[
                    ("volume-leftovers", "Update", None, meta_fields),
                    (
                        "volume-leftovers",
                        "Apply",
                        Some("status"),
                        serde_json::json!({"status": v["status"].clone()}),
                    ),
                ],
            );
            served["metadata"]["generation"] = 1.into();
            vls.push(served);
        }
    }
    let vl_count = vls.len();
    let vl_pages = pages("VolumeLeftoverList", vls.into_iter());
    println!(
        "wire (JSON as listed): {:.0} B/VolumeLeftover ({} findings)",
        wire(&vl_pages, vl_count),
        vl_count
    );
    // Before: the whole object, stripped of managedFields and the last-applied annotation (what
    // the store kept until it kept the lean form).
    let (full_vl_store, _full_vl_w, full_vl_total, full_vl_peak) =
        ingest::<VolumeLeftover, VolumeLeftover>(&vl_pages, |mut o| {
            strip_leftover(&mut o);
            o
        });
    let (full_vl_obj, _, _) = split(&full_vl_store, full_vl_total);
    drop((full_vl_store, _full_vl_w));
    // The store the operator keeps: the lean form, made by the controller's own conversion.
    // Its volumes are in the PV store, so no finding keeps the facts of a tombstone.
    let (vl_store, _vl_w, vl_total, vl_peak) = {
        let f = lean_leftover(Keep::default(), Some(pv_store.clone()));
        ingest::<LeftoverObject, Leftover>(&vl_pages, move |o| f(o))
    };
    let unseen = vl_store
        .state()
        .iter()
        .filter(|o| o.status.as_ref().is_some_and(|s| s.has_record()))
        .count();
    assert_eq!(unseen, 0, "every finding's volume is in the PV store");
    // At a restart, findings listed before the PVs keep those facts until the PVs are listed.
    let (restart_vl_store, _restart_vl_w, restart_vl_total, _) = {
        let f = lean_leftover(Keep::default(), None);
        ingest::<LeftoverObject, Leftover>(&vl_pages, move |o| f(o))
    };
    drop((restart_vl_store, _restart_vl_w));
    let (vl_obj, vl_keys, vl_table) = split(&vl_store, vl_total);
    let vl_state = vl_store.state();
    let vl_vec = |size: usize| Heap {
        live: (size * vl_state.len()) as isize,
        chunk: chunk(size * vl_state.len()),
        blocks: 1,
    };
    let (_a, vl_status) = held(|| {
        vl_state
            .iter()
            .map(|o| o.status.clone())
            .collect::<Vec<_>>()
    });
    let vl_status = vl_status.minus(vl_vec(std::mem::size_of::<
        Option<volume_leftovers::model::leftover::Status>,
    >()));
    drop((_a, vl_state));
    // With --openreports: the facts and message of every finding, for the mirror.
    let (report_vl_store, _report_vl_w, report_vl_total, _) = {
        let f = lean_leftover(
            Keep {
                report: true,
                ..Keep::default()
            },
            Some(pv_store.clone()),
        );
        ingest::<LeftoverObject, Leftover>(&vl_pages, move |o| f(o))
    };
    drop((report_vl_store, _report_vl_w));

    // The loop's memory of each published finding (Scheduler name state with its Memo).
    // After a sweep (every PV and VolumeLeftover queued, decided, settled), as the operator has
    // it once idle.
    let (sched, sched_heap) = held(|| {
        let mut s = Scheduler::new(Limits::default(), 1);
        s.activate();
        for o in vl_store.state() {
            s.mark(&o.name);
        }
        for pv in pv_store.state() {
            s.mark(pv.name());
        }
        let _: Vec<(Arc<str>, ())> =
            s.run(|_, _| volume_leftovers::engine::schedule::Next::<()>::Idle);
        for o in vl_store.state() {
            let st = o.status.as_ref().unwrap();
            let name = o.name.to_string();
            s.memo(&name).published = Some(Published {
                reason: st.reason,
                storage_class: st
                    .storage_class
                    .as_deref()
                    .map(String::from)
                    .unwrap_or_default(),
                state: st.state,
                capacity_bytes: st.capacity_bytes.unwrap_or(0),
                first_seen: st.first_seen.0.as_second(),
                monthly_cost: None,
            });
            s.settle(&name);
        }
        s
    });
    // The stores, the index and the loop's memory (not the list pages this benchmark still holds).
    let all = pv_total
        .plus(claim_total)
        .plus(class_total)
        .plus(vl_total)
        .plus(index_heap)
        .plus(sched_heap);
    let cached = shape.pvs + claims_n + vl_count;

    let rows = vec![
        row("PV store (Store<Volume>), total", shape.pvs, pv_total),
        row("  objects: Arc<Volume> (own strings)", shape.pvs, pv_obj),
        row(
            format!(
                "    of which the struct itself ({} B inline + Arc)",
                std::mem::size_of::<Volume>()
            ),
            shape.pvs,
            inline::<Volume>(shape.pvs),
        ),
        row("    of which metadata strings and maps", shape.pvs, pv_meta),
        row("    of which spec strings and maps", shape.pvs, pv_spec),
        row("    of which status strings", shape.pvs, pv_status),
        row("  keys: ObjectRef strings (name only)", shape.pvs, pv_keys),
        row(
            "  hash table + the shared strings (name, class, ...)",
            shape.pvs,
            pv_table,
        ),
        row("claim store (Store<Claim>), total", claims_n, claim_total),
        row("  objects: Arc<Claim> (own strings)", claims_n, claim_obj),
        row(
            format!(
                "    of which the struct itself ({} B inline + Arc)",
                std::mem::size_of::<Claim>()
            ),
            claims_n,
            inline::<Claim>(claims_n),
        ),
        row(
            "  keys: ObjectRef strings (name, namespace)",
            claims_n,
            claim_keys,
        ),
        row("  hash table", claims_n, claim_table),
        row(
            "class store (Store<StorageClass>)",
            fleet::CLASSES.len(),
            class_total,
        ),
        row(
            "VolumeLeftover store (Store<Leftover>, lean), total",
            vl_count,
            vl_total,
        ),
        row("  objects: Arc<Leftover>", vl_count, vl_obj),
        row(
            format!(
                "    of which the struct itself ({} B inline + Arc)",
                std::mem::size_of::<Leftover>()
            ),
            vl_count,
            inline::<Leftover>(vl_count),
        ),
        row(
            "    of which what is kept of the status (class, ack, digest)",
            vl_count,
            vl_status,
        ),
        row("  keys: ObjectRef strings (name only)", vl_count, vl_keys),
        row("  hash table", vl_count, vl_table),
        row(
            "  listed before the PVs (a restart): facts kept for tombstones",
            vl_count,
            restart_vl_total,
        ),
        row(
            "  the same with --openreports (facts + message of all)",
            vl_count,
            report_vl_total,
        ),
        row(
            "  before: Store<VolumeLeftover> (whole object), total",
            vl_count,
            full_vl_total,
        ),
        row(
            format!(
                "    of which objects: Arc<VolumeLeftover> ({} B inline)",
                std::mem::size_of::<VolumeLeftover>()
            ),
            vl_count,
            full_vl_obj,
        ),
        row("reverse index (RefIndex)", shape.pvs, index_heap),
        row(
            format!(
                "loop memory of published findings, after a sweep of every name (Scheduler; NameState {} B)",
                std::mem::size_of::<volume_leftovers::run::scheduling::NameState>()
            ),
            vl_count,
            sched_heap,
        ),
        row("all of the above, per cached object", cached, all),
    ];
    print_rows(
        "live heap by store, after the lists (counting allocator):",
        &rows,
    );
    println!(
        "reading the lists on one thread (deserialize + convert + store), per object: {}",
        INGEST.lock().unwrap().join(", ")
    );
    println!(
        "transient peak while listing (above what was held before): PVs {:.1} MiB (store {:.1}), claims {:.1} MiB (store {:.1}), VolumeLeftovers {:.1} MiB (store {:.1}; whole objects before: {:.1}, store {:.1})",
        mib(pv_peak),
        mib(pv_total.live),
        mib(claim_peak),
        mib(claim_total.live),
        mib(vl_peak),
        mib(vl_total.live),
        mib(full_vl_peak),
        mib(full_vl_total.live)
    );

    // --- levers: the same data in leaner forms -----------------------------------------------
    let mut levers = Vec::new();
    let pv_state = pv_store.state();
    let ((lean_pv_store, _w1, interner), lean_pv) = held(|| {
        let mut interner = Interner::default();
        let items: Vec<LeanVolume> = pv_state
            .iter()
            .map(|v| lean_volume(v, &mut interner))
            .collect();
        let (s, w) = lean_store(items.into_iter());
        (s, w, interner)
    });
    levers.push(row(
        "lean PV (one flat struct, finalizers only while terminating)",
        shape.pvs,
        lean_pv,
    ));
    // The claim store and the reverse index are the operator's own (already lean).
    let lean_all = lean_pv
        .plus(claim_total)
        .plus(vl_total)
        .plus(index_heap)
        .plus(sched_heap)
        .plus(class_total);
    levers.push(row(
        "with the lean PV: all stores + index + loop memory, per cached object",
        cached,
        lean_all,
    ));
    print_rows(
        "the PVs in a leaner form still (a prototype in this file, a kube-runtime reflector store):",
        &levers,
    );
    println!(
        "interned strings: {} distinct; stores hold {} lean PVs, {} claims, {} VolumeLeftovers",
        interner.0.len(),
        lean_pv_store.len(),
        claim_store.len(),
        vl_store.len()
    );
    drop((index, sched, pv_state));
}
