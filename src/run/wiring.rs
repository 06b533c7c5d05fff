//! Wiring: what the loop reads and writes through, built from the client and the settings —
//! the four feeds and the stores they fill, the two snapshot feeds (started once their kinds are
//! served), the census tasks, the leader election, the writer,
//! Events and the ClusterReport writer. I/O: it starts the census and election tasks (the
//! feeds start when the loop first polls them) and stops them on shutdown.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::SelectAll;
use futures::{Stream, StreamExt};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::census::CensusReport;
use crate::decide::lookup::Claim;
use crate::engine::backoff::seed;
use crate::model::leftover::{Keep, Leftover, LeftoverObject};
use crate::model::snapshot::{
    Snapshot, SnapshotContent, VolumeSnapshotContentObject, VolumeSnapshotObject,
};
use crate::model::volume::{Volume, VolumeObject};
use crate::publish::events::Events;
use crate::publish::leader::{self, Role};
use crate::publish::report::ReportWriter;
use crate::publish::writer::Writer;
use crate::run::settings::Settings;
use crate::telemetry::Standing;
use crate::telemetry::{Health, Metrics};
use crate::watch::feed::{Convert, FeedItem, FeedTiming, Stored, feed, strip};

/// What the claim feed reads of a claim: its lean metadata (see [`crate::decide::lookup::ClaimObject`]).
pub type ClaimMeta = crate::decide::lookup::ClaimObject;

/// One item of the merged feeds (boxed: a PV is a few hundred bytes to kilobytes).
pub(crate) enum Input {
    Pv(Box<FeedItem<Volume>>),
    Pvc(Box<FeedItem<Claim>>),
    Sc(Box<FeedItem<StorageClass>>),
    Vl(Box<FeedItem<Leftover>>),
    Vsc(Box<FeedItem<SnapshotContent>>),
    Vs(Box<FeedItem<Snapshot>>),
    /// The census reports that arrived together (a GCE listing sends one per zone and region).
    Census(Vec<CensusReport>),
}

/// One feed, or the census's results, as the loop reads it.
pub(crate) type InputStream = Pin<Box<dyn Stream<Item = Input> + Send>>;

/// The stores the feeds fill: what the loop decides from.
pub(crate) struct Stores {
    pub(crate) pv: Store<Volume>,
    pub(crate) pvc: Store<Claim>,
    pub(crate) sc: Store<StorageClass>,
    pub(crate) vl: Store<Leftover>,
    /// VolumeSnapshotContents (empty while snapshot.storage.k8s.io/v1 is not served).
    pub(crate) vsc: Store<SnapshotContent>,
    /// VolumeSnapshots (empty while snapshot.storage.k8s.io/v1 is not served).
    pub(crate) vs: Store<Snapshot>,
}

/// What [`wire`] builds.
pub(crate) struct Wired {
    /// The four feeds, and the census's results when it is on, merged.
    pub(crate) inputs: SelectAll<InputStream>,
    /// What the loop keeps.
    pub(crate) parts: Parts,
    /// The tasks beside the loop.
    pub(crate) tasks: Tasks,
}

/// What the loop reads and writes through.
pub(crate) struct Parts {
    pub(crate) stores: Stores,
    /// This replica's role, as the election (or its absence) sets it.
    pub(crate) role: watch::Receiver<Role>,
    /// The only writer of VolumeLeftovers.
    pub(crate) writer: Writer,
    /// Events on the PVs, when they are on.
    pub(crate) events: Option<Events>,
    /// The OpenReports mirror's writer, when it is on.
    pub(crate) report: Option<ReportWriter>,
}

/// The tasks beside the loop, to stop on shutdown.
pub(crate) struct Tasks {
    census: Vec<JoinHandle<()>>,
    election: Option<JoinHandle<()>>,
    stop_election: watch::Sender<bool>,
}

/// Builds what the loop reads and writes through, and starts the census and the election.
pub(crate) fn wire(
    client: Client,
    settings: &Settings,
    health: &Health,
    metrics: &Arc<Metrics>,
) -> Wired {
    let (stores, mut inputs) = feeds(&client, settings);
    let census = census(settings, &stores.pv, metrics, &mut inputs);
    metrics.init_reasons();
    let (role, election, stop_election) = election(&client, settings, health, metrics);
    let parts = Parts {
        stores,
        role,
        events: settings.events.clone().map(|instance| {
            Events::new(
                client.clone(),
                instance,
                settings.request_timeout,
                metrics.clone(),
            )
        }),
        report: settings
            .openreports
            .then(|| ReportWriter::new(client.clone(), settings.request_timeout)),
        writer: Writer::new(Api::all(client), settings.request_timeout),
    };
    Wired {
        inputs,
        parts,
        tasks: Tasks {
            census,
            election,
            stop_election,
        },
    }
}

/// The four feeds (PVs, claims, classes, VolumeLeftovers), merged, and the stores they fill.
fn feeds(client: &Client, settings: &Settings) -> (Stores, SelectAll<InputStream>) {
    let cfg = watcher::Config::default()
        .page_size(settings.page_size)
        .timeout(settings.watch_timeout);
    let timing = settings.feed;
    let exclusions = Arc::new(settings.exclusions.clone());
    let pv_strip: Convert<VolumeObject, Volume> = Arc::new(move |pv| Volume::read(pv, &exclusions));
    let (pv, pvs) = watched(
        Api::<VolumeObject>::all(client.clone()),
        &cfg,
        timing,
        "pv",
        pv_strip,
        Input::Pv,
    );
    let pvc_strip: Convert<ClaimMeta, Claim> = Arc::new(|c| Claim::of(&c));
    let (pvc, claims) = watched(
        Api::<ClaimMeta>::all(client.clone()),
        &cfg,
        timing,
        "pvc",
        pvc_strip,
        Input::Pvc,
    );
    let sc_strip = strip(strip_class);
    let (sc, classes) = watched(
        Api::<StorageClass>::all(client.clone()),
        &cfg,
        timing,
        "sc",
        sc_strip,
        Input::Sc,
    );
    // Only what deciding and comparing need; the facts of every finding when the mirror shows
    // them.
    let vl_lean = lean_leftover(
        Keep {
            report: settings.openreports,
            volume_seen: false,
        },
        Some(pv.clone()),
    );
    let (vl, leftovers) = watched(
        Api::<LeftoverObject>::all(client.clone()),
        &cfg,
        timing,
        "vl",
        vl_lean,
        Input::Vl,
    );
    let snapshot_exclusions = Arc::new(settings.snapshot_exclusions.clone());
    let x = snapshot_exclusions.clone();
    let vsc_read: Convert<VolumeSnapshotContentObject, SnapshotContent> =
        Arc::new(move |o| SnapshotContent::read(o, &x));
    let (vsc, contents) = watched_once_served(
        Api::<VolumeSnapshotContentObject>::all(client.clone()),
        client,
        settings,
        "vsc",
        vsc_read,
        Input::Vsc,
    );
    let vs_read: Convert<VolumeSnapshotObject, Snapshot> =
        Arc::new(move |o| Snapshot::read(o, &snapshot_exclusions));
    let (vs, snapshots) = watched_once_served(
        Api::<VolumeSnapshotObject>::all(client.clone()),
        client,
        settings,
        "vs",
        vs_read,
        Input::Vs,
    );
    let mut inputs = SelectAll::new();
    inputs.extend([pvs, claims, classes, leftovers, contents, snapshots]);
    (
        Stores {
            pv,
            pvc,
            sc,
            vl,
            vsc,
            vs,
        },
        inputs,
    )
}

/// A snapshot kind's feed: every `K` of the cluster, once discovery says the snapshot kinds are
/// served ([`crate::watch::served::once_served`]); until then the store stays empty and the
/// feed says it is not served.
fn watched_once_served<K, L: Stored>(
    api: Api<K>,
    client: &Client,
    settings: &Settings,
    name: &'static str,
    convert: Convert<K, L>,
    input: fn(Box<FeedItem<L>>) -> Input,
) -> (Store<L>, InputStream)
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let cfg = watcher::Config::default()
        .page_size(settings.page_size)
        .timeout(settings.watch_timeout);
    let (store, writer) = reflector::store();
    let timing = settings.feed;
    let items = crate::watch::served::once_served(
        client.clone(),
        timing,
        settings.request_timeout,
        seed(name),
        move || feed(api, cfg, convert, writer, timing, seed(name)),
    );
    (store, Box::pin(items.map(move |i| input(Box::new(i)))))
}

/// One feed: every `K` of the cluster, kept in a new store as `convert` makes it, each item
/// handed to the loop as `input` wraps it.
fn watched<K, L: Stored>(
    api: Api<K>,
    cfg: &watcher::Config,
    timing: FeedTiming,
    name: &str,
    convert: Convert<K, L>,
    input: fn(Box<FeedItem<L>>) -> Input,
) -> (Store<L>, InputStream)
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let items = feed(api, cfg.clone(), convert, writer, timing, seed(name));
    (store, Box::pin(items.map(move |i| input(Box::new(i)))))
}

/// The census reports waiting for the loop at most (a census task waits when it is full), and
/// the most it takes at once: a GCE listing's reports (one per zone and region) arrive together.
const CENSUS_CHANNEL: usize = 64;

/// The census task, when the census is on: the one census loop, driving every lister (a Ceph
/// cluster, a GCE project, an EBS region); their results join the inputs. A backend without a
/// section makes no lister and calls no library.
fn census(
    settings: &Settings,
    pvs: &Store<Volume>,
    metrics: &Metrics,
    inputs: &mut SelectAll<InputStream>,
) -> Vec<JoinHandle<()>> {
    let Some(c) = settings.census.clone() else {
        return Vec::new();
    };
    let (tx, rx) = tokio::sync::mpsc::channel(CENSUS_CHANNEL);
    for k in c.config.census(c.image_grace).pools.keys() {
        metrics.census_pending(k);
    }
    inputs.push(Box::pin(
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) })
            .ready_chunks(CENSUS_CHANNEL)
            .map(Input::Census),
    ));
    let listers = crate::census::listers(&c);
    // A configured scope this build cannot list (its backend's feature is off) is failed once,
    // with a line saying so: it stays Unknown, never silently pending.
    for report in crate::census::unbuilt(&c, &listers) {
        if let Err(e) = tx.try_send(report) {
            tracing::warn!(error = %e, "the census of a scope this build cannot list was not reported");
        }
    }
    if listers.is_empty() {
        return Vec::new();
    }
    vec![tokio::spawn(crate::census::backend::run(
        listers,
        c.interval,
        pvs.clone(),
        tx,
    ))]
}

/// The election runs beside the loop; without it this process leads for ever. The role, the
/// task, and what stops it.
fn election(
    client: &Client,
    settings: &Settings,
    health: &Health,
    metrics: &Metrics,
) -> (
    watch::Receiver<Role>,
    Option<JoinHandle<()>>,
    watch::Sender<bool>,
) {
    let (role_tx, role_rx) = watch::channel(match &settings.leader {
        Some(_) => Role::Standby,
        None => Role::Unelected,
    });
    if settings.leader.is_none() {
        // The role never changes, so `on_role` never says so: this replica leads from the start.
        metrics.leader(true);
    }
    let (stop_election, election_stop_rx) = watch::channel(false);
    let election = settings.leader.clone().map(|s| {
        health.set_leader(Standing::standby(&s));
        tokio::spawn(leader::run(client.clone(), s, role_tx, election_stop_rx))
    });
    (role_rx, election, stop_election)
}

impl Tasks {
    /// Stops the census. A census in a blocking call finishes on its own (bounded by its
    /// timeouts); the connections the task kept are let go when it is dropped, and shut down
    /// before the process exits.
    pub(crate) async fn stop_census(&mut self, grace: Duration) {
        let tasks = std::mem::take(&mut self.census);
        if tasks.is_empty() {
            return;
        }
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
        crate::census::released(grace).await;
    }

    /// Releases the Lease (within a bound) so that another replica takes over at once. Only
    /// once no write of ours is in flight.
    pub(crate) async fn stop_election(self) {
        let _ = self.stop_election.send(true);
        if let Some(task) = self.election {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

/// Keeps a class's name, reclaim policy and the two parameters a finding records (the disk
/// type and GCE's replication type: what the price table may price by).
pub fn strip_class(c: &mut StorageClass) {
    c.metadata.managed_fields = None;
    c.metadata.annotations = None;
    c.metadata.labels = None;
    if let Some(p) = c.parameters.as_mut() {
        p.retain(|k, _| {
            k.eq_ignore_ascii_case("type") || k.eq_ignore_ascii_case("replication-type")
        });
    }
    if c.parameters.as_ref().is_some_and(|p| p.is_empty()) {
        c.parameters = None;
    }
    c.allowed_topologies = None;
    c.mount_options = None;
}

/// What the VolumeLeftover store keeps of each object: its lean form ([`Leftover`]). (It kept the
/// whole object, stripped of managedFields, before; `examples/memory.rs` compares the two.)
///
/// With `volumes`, a finding whose volume (same name and uid) is in that store does not keep the
/// facts it would need to become a tombstone ([`Keep::volume_seen`]).
pub fn lean_leftover(
    keep: Keep,
    volumes: Option<Store<Volume>>,
) -> Convert<LeftoverObject, Leftover> {
    Arc::new(move |o| {
        let volume_seen = volumes
            .as_ref()
            .is_some_and(|pvs| volume_present(pvs, &o.spec.volume_name, &o.spec.volume_uid));
        Leftover::read(
            o,
            Keep {
                volume_seen,
                ..keep
            },
        )
    })
}

/// Whether the PV store holds the volume of this name and uid.
pub(crate) fn volume_present(pvs: &Store<Volume>, name: &str, uid: &str) -> bool {
    pvs.get(&ObjectRef::new(name))
        .is_some_and(|v| v.metadata.uid.as_ref().is_some_and(|u| *u == *uid))
}
