//! The Ceph RBD census, I/O: connects to each configured cluster as its read-only user and
//! censuses each pool every `interval`, handing each result (or why it failed) to the loop.
//!
//! **I/O: reads Ceph (through [`crate::census::ceph::rbd`]); reads the PV store; writes nothing.** Every call
//! blocks on librados's threads, so each census runs on a blocking thread, bounded per request
//! (`timeout`) and as a whole (`deadline`); a census that is still running when its next turn
//! comes is not started twice. A connection is kept between censuses and dropped after a
//! failure that aborts a census (the next one reconnects).

pub mod config;
pub mod rbd;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

use crate::census::ceph::config::ClusterConfig;
use crate::census::ceph::rbd::{Category, CephConfig, Cluster};
use crate::decide::census::{
    DiskFacts, FailureCategory, FailureKind, PoolKey, Scope, ScopeListing, Seen, image_ref,
};
use crate::decide::classify::volume_source;
use crate::engine::clock::wall_clock;
use crate::model::crd::ImageOwner;
use crate::model::volume::Volume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::census::{CensusFailure, CensusReport, CensusSettings};

impl From<Category> for FailureKind {
    /// Ceph's categories, mapped once: what the logs print stays Ceph's own name.
    fn from(c: Category) -> FailureKind {
        let category = match c {
            Category::Unavailable => FailureCategory::Timeout,
            Category::Forbidden => FailureCategory::Forbidden,
            Category::NotFound | Category::LibraryMissing | Category::Config | Category::Other => {
                FailureCategory::Other
            }
        };
        FailureKind {
            category,
            name: c.as_str(),
        }
    }
}

/// A librados/librbd error as the shared failure, the one place it becomes one: its category
/// (mapped once, above) and its line (the call, what it was called on, and the errno's text
/// and number: `rbd_list2 on pool replicapool: Permission denied (-13)`), after `context`
/// when given, one line and bounded as every backend's is.
pub(crate) fn failure(e: rbd::RbdError, context: Option<String>) -> CensusFailure {
    CensusFailure::caused(e.category(), context, e)
}

/// A request or connect that outlived its bound: Ceph is not answering, as with librados's
/// own timeout (-110), which is [`Category::Unavailable`] too.
fn abandoned(message: String) -> CensusFailure {
    CensusFailure::new(Category::Unavailable, message)
}

/// Runs the census until `tx` is closed.
pub(crate) async fn run(
    settings: CensusSettings,
    pvs: Store<Volume>,
    tx: mpsc::Sender<CensusReport>,
) {
    // The PV store tells which images need no details; before it has synced, every image's
    // details would be read.
    let _ = pvs.wait_until_ready().await;
    let mut conns: Vec<Kept> = (0..settings.config.clusters.len())
        .map(|_| Kept(None))
        .collect();
    let mut pool_ids: std::collections::HashMap<PoolKey, i64> = Default::default();
    loop {
        for (i, cluster) in settings.config.clusters.iter().enumerate() {
            if tx.is_closed() {
                return;
            }
            census_cluster(cluster, &settings, &pvs, &mut conns[i], &mut pool_ids, &tx).await;
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = tx.closed() => return,
        }
    }
}

/// Lets a connection go on a thread of its own. `rados_shutdown` waits for the connection's
/// requests and threads to wind down; after a stall it can take as long as Ceph does, and the
/// census loop (an async task) must not wait with it. Whatever still uses the connection (a
/// census abandoned at its deadline) holds its own reference; the last one shuts it down.
/// [`settle`] waits for these threads before the process exits.
fn release(c: Arc<Cluster>) {
    let guard = Releasing::new();
    // If no thread can be started, the closure (the connection and the guard) is dropped here:
    // slower, not wrong.
    let _ = std::thread::Builder::new()
        .name("rados-release".into())
        .spawn(move || {
            let _guard = guard;
            let started = Instant::now();
            let last = Arc::strong_count(&c) == 1;
            drop(c);
            if last {
                tracing::debug!(
                    seconds = started.elapsed().as_secs_f64(),
                    "a Ceph connection was shut down"
                );
            }
        });
}

/// Connections being let go by [`release`].
static RELEASING: AtomicUsize = AtomicUsize::new(0);

/// Counts one connection being let go while it lives.
struct Releasing;

impl Releasing {
    fn new() -> Releasing {
        RELEASING.fetch_add(1, Ordering::SeqCst);
        Releasing
    }
}

impl Drop for Releasing {
    fn drop(&mut self) {
        RELEASING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits, at most `bound`, until no connection is being let go; says whether none is. The
/// process must not exit while librados shuts a connection down: its C++ globals are torn down
/// at exit, and the exception that throws in the shutting-down thread aborts the process
/// ("Rust cannot catch foreign exceptions").
pub(crate) async fn connections_released(bound: Duration) -> bool {
    let until = tokio::time::Instant::now() + bound;
    while RELEASING.load(Ordering::SeqCst) > 0 {
        if tokio::time::Instant::now() >= until {
            tracing::warn!(
                connections = RELEASING.load(Ordering::SeqCst),
                "Ceph connections are still shutting down; exiting anyway"
            );
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// A connection kept between censuses, let go through [`release`] however it goes: replaced
/// after a failure, or dropped with the census task when the operator stops (the task is
/// aborted then, wherever it is).
struct Kept(Option<Arc<Cluster>>);

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            release(c);
        }
    }
}

/// One cluster's turn: connects if no connection is kept, censuses its pools in order, and
/// sends one report for every pool, censused or not.
async fn census_cluster(
    cluster: &ClusterConfig,
    settings: &CensusSettings,
    pvs: &Store<Volume>,
    conn: &mut Kept,
    pool_ids: &mut std::collections::HashMap<PoolKey, i64>,
    tx: &mpsc::Sender<CensusReport>,
) {
    let keys: Vec<PoolKey> = cluster
        .pools
        .iter()
        .map(|p| PoolKey::new(&cluster.cluster_id, &p.name, p.rados_namespace.as_deref()))
        .collect();
    if conn.0.is_none() && !reconnect(cluster, settings, conn, &keys, tx).await {
        return;
    }
    for (n, pool) in cluster.pools.iter().enumerate() {
        let key = keys[n].clone();
        let Some(c) = conn.0.clone() else { return };
        // The images a PV names need no details, only their sizes (compared with the PVs'):
        // the census reads the others' in full.
        let referenced = referenced(pvs, &key, pool_ids.get(&key).copied());
        let (report, abort) = census_pool(c, &key, pool, settings.deadline, move |name| {
            if referenced.contains(name) {
                rbd::Ask::Size
            } else {
                rbd::Ask::Detail
            }
        })
        .await;
        if let Ok(s) = &report.result
            && let Some(id) = s.scope_id
        {
            pool_ids.insert(key.clone(), id);
        }
        if abort {
            *conn = Kept(None);
        }
        let failed = report.result.as_ref().err().map(|f| f.kind);
        if tx.send(report).await.is_err() {
            return;
        }
        if let Some(first_failure) = failed
            && conn.0.is_none()
        {
            // The rest of this cluster's pools would wait out the same timeout: they are
            // unknown too, and are tried again next time.
            not_censused(&keys[n + 1..], &key, first_failure, tx).await;
            return;
        }
    }
}

/// Connects `conn` again; says whether it did. When it cannot, each of the cluster's pools
/// (`keys`) is reported with the failure: none of them was censused.
async fn reconnect(
    cluster: &ClusterConfig,
    settings: &CensusSettings,
    conn: &mut Kept,
    keys: &[PoolKey],
    tx: &mpsc::Sender<CensusReport>,
) -> bool {
    let started = Instant::now();
    match connect(cluster, settings).await {
        Ok(c) => {
            conn.0 = Some(Arc::new(c));
            true
        }
        Err(e) => {
            for key in keys.iter().cloned() {
                let _ = tx
                    .send(CensusReport {
                        key: key.into(),
                        result: Err(e.clone()),
                        requests: 0,
                        elapsed: started.elapsed(),
                    })
                    .await;
            }
            false
        }
    }
}

/// Reports each pool of `rest` as not censused, with the category of the failure of pool
/// `failed` that ended its cluster's turn.
async fn not_censused(
    rest: &[PoolKey],
    failed: &PoolKey,
    kind: FailureKind,
    tx: &mpsc::Sender<CensusReport>,
) {
    for key in rest {
        let _ = tx
            .send(CensusReport {
                key: key.clone().into(),
                result: Err(CensusFailure::new(
                    kind,
                    format!("not censused: the census of pool {failed} failed first"),
                )),
                requests: 0,
                elapsed: Duration::ZERO,
            })
            .await;
    }
}

/// One census of one pool on a blocking thread, reading of each image what `ask` says, bounded
/// by `deadline`. Also says whether the connection must be dropped.
async fn census_pool(
    c: Arc<Cluster>,
    key: &PoolKey,
    pool: &crate::census::ceph::config::PoolConfig,
    deadline: Duration,
    ask: impl Fn(&str) -> rbd::Ask + Send + 'static,
) -> (CensusReport, bool) {
    let started = Instant::now();
    let at = wall_clock();
    let pool_name = pool.name.clone();
    let namespace = pool.rados_namespace.clone();
    let job = tokio::task::spawn_blocking(move || {
        c.census(&pool_name, namespace.as_deref(), |img| ask(&img.name))
    });
    let (result, requests, abort) = match tokio::time::timeout(deadline, job).await {
        Ok(Ok(Ok(census))) => {
            let requests = census.requests.total();
            (Ok(snapshot_of(census, at)), requests, false)
        }
        Ok(Ok(Err(e))) => {
            let abort = e.aborts_census();
            (Err(failure(e, None)), 0, abort)
        }
        Ok(Err(join)) => (
            Err(CensusFailure::caused(
                Category::Other,
                Some("the census task failed".into()),
                join,
            )),
            0,
            true,
        ),
        Err(_) => (
            Err(abandoned(format!(
                "the census of pool {key} took longer than {}s; it is abandoned",
                deadline.as_secs()
            ))),
            0,
            // The blocking call may still be running: a new connection for the next one.
            true,
        ),
    };
    (
        CensusReport {
            key: key.clone().into(),
            result,
            requests,
            elapsed: started.elapsed(),
        },
        abort,
    )
}

/// One census of every configured pool, recorded into `census` (for `scan`): the details of
/// the images `details` names for each pool (none when it names none) and, with `sizes`, the
/// size of every other image.
pub async fn census_once(
    settings: &CensusSettings,
    census: &mut crate::decide::census::Census,
    details: &std::collections::HashMap<Scope, HashSet<String>>,
    sizes: bool,
) -> Vec<CensusReport> {
    let mut reports = Vec::new();
    for cluster in &settings.config.clusters {
        let conn = match connect(cluster, settings).await {
            Ok(c) => Kept(Some(Arc::new(c))),
            Err(e) => {
                for p in &cluster.pools {
                    let key = Scope::from(PoolKey::new(
                        &cluster.cluster_id,
                        &p.name,
                        p.rados_namespace.as_deref(),
                    ));
                    census.record(&key, Err(e.message.clone()));
                    reports.push(CensusReport {
                        key,
                        result: Err(e.clone()),
                        requests: 0,
                        elapsed: Duration::ZERO,
                    });
                }
                continue;
            }
        };
        let Some(c) = &conn.0 else { continue };
        for p in &cluster.pools {
            let key = PoolKey::new(&cluster.cluster_id, &p.name, p.rados_namespace.as_deref());
            let wanted = details
                .get(&Scope::Ceph(key.clone()))
                .cloned()
                .unwrap_or_default();
            let (report, _) = census_pool(c.clone(), &key, p, settings.deadline, move |n| {
                match (wanted.contains(n), sizes) {
                    (true, _) => rbd::Ask::Detail,
                    (false, true) => rbd::Ask::Size,
                    (false, false) => rbd::Ask::Name,
                }
            })
            .await;
            census.record(&report.key, report.result.clone().map_err(|f| f.message));
            reports.push(report);
        }
    }
    connections_released(settings.deadline).await;
    reports
}

/// Connects as the cluster's user, on a blocking thread, waiting at most the census deadline
/// for it (librados bounds it by `timeout`; this bounds what librados does not).
async fn connect(
    cluster: &ClusterConfig,
    settings: &CensusSettings,
) -> Result<Cluster, CensusFailure> {
    let timeout = settings.timeout;
    let key = match &cluster.key_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| {
                    CensusFailure::caused(
                        Category::Config,
                        Some(format!("cannot read the key file {}", path.display())),
                        e,
                    )
                })?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let config = CephConfig {
        mon_host: cluster.monitors.join(","),
        user: cluster.user.clone(),
        keyring: cluster.keyring.clone(),
        key,
        conf_file: cluster.conf_file.clone(),
        timeout,
    };
    let id = &cluster.cluster_id;
    tracing::debug!(cluster = %id, "connecting to Ceph");
    // The connect counts as a connection being let go until it has been handed over: an
    // abandoned one goes on in its thread, and the connection it makes after all is shut down
    // there, which [`settle`] waits for like any other.
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let guard = Releasing::new();
    let job = tokio::task::spawn_blocking(move || {
        let _guard = guard;
        if let Err(Ok(late)) = tx.send(Cluster::connect(&config)) {
            drop(late);
        }
    });
    match tokio::time::timeout(settings.deadline, &mut rx).await {
        Ok(Ok(r)) => r.map_err(|e| failure(e, Some(format!("cluster {id}")))),
        Ok(Err(_)) => Err(CensusFailure::new(
            Category::Other,
            match job.await {
                Err(e) => format!("cluster {id}: the connect task failed: {e}"),
                Ok(()) => format!("cluster {id}: the connect task ended without an answer"),
            },
        )),
        Err(_) => {
            // Closing first means the thread either sees the channel closed (and shuts its
            // connection down itself) or has already sent: then it is let go here.
            rx.close();
            if let Ok(Ok(late)) = rx.try_recv() {
                release(Arc::new(late));
            }
            Err(abandoned(format!(
                "cluster {id}: connecting took longer than {}s; it is abandoned",
                settings.deadline.as_secs()
            )))
        }
    }
}

/// The names of the images of `key` that a PV names (their details are not needed).
fn referenced(pvs: &Store<Volume>, key: &PoolKey, pool_id: Option<i64>) -> HashSet<String> {
    pvs.state()
        .iter()
        .filter_map(|pv| {
            let r = image_ref(&volume_source(pv.spec.as_ref()?))?;
            let same_cluster = r.cluster_id.as_ref().is_none_or(|c| *c == key.cluster_id);
            let same_pool = match (&r.pool, r.pool_id) {
                (Some(p), _) => *p == key.pool,
                (None, Some(id)) => pool_id == Some(id),
                (None, None) => false,
            };
            (same_cluster && same_pool && r.namespace == key.namespace).then_some(r.name)
        })
        .collect()
}

/// The census of one pool as the decisions read it, from the client's listing.
pub fn snapshot_of(c: rbd::PoolCensus, started: Time) -> ScopeListing {
    let unread = c
        .images
        .iter()
        .filter_map(|i| match &i.detail {
            // Logged and printed by `scan` as a failure's line is: one line, bounded alike.
            rbd::Detail::Failed(e) => {
                Some((i.name.name.clone(), crate::census::one_line(&e.to_string())))
            }
            _ => None,
        })
        .collect();
    let images = c
        .images
        .into_iter()
        .map(|i| {
            let size_only = match &i.detail {
                rbd::Detail::Size(bytes) => Some(*bytes),
                _ => None,
            };
            let detail = match i.detail {
                rbd::Detail::Read(d) => Some(Box::new(DiskFacts::ceph(
                    d.size,
                    d.created,
                    d.watchers.iter().map(|w| w.address.clone()).collect(),
                    d.csi_owner().map(|o| ImageOwner {
                        volume_name: o.pv_name,
                        claim_namespace: o.pvc_namespace,
                        claim_name: o.pvc_name,
                        cluster_name: o.cluster_name,
                    }),
                ))),
                _ => None,
            };
            (
                i.name.name,
                Seen {
                    id: i.name.id,
                    detail,
                    size_only,
                },
            )
        })
        .collect();
    ScopeListing {
        started,
        scope_id: Some(c.pool_id),
        images,
        recoverable: c.trash.into_iter().map(|t| t.name).collect(),
        unread,
    }
}
