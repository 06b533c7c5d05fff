//! The Ceph RBD census, I/O: connects to each configured cluster as its read-only user and
//! censuses each pool every `interval`, handing each result (or why it failed) to the loop.
//!
//! **I/O: reads Ceph (through [`crate::census::ceph::rbd`]); reads the PV store; writes nothing.** Every call
//! blocks on librados's threads, so each census runs on a blocking thread, bounded per request
//! (`timeout`) and as a whole (`deadline`); a census that is still running when its next turn
//! comes is not started twice. A connection is kept between censuses and dropped after a
//! failure that aborts a census (the next one reconnects).

pub mod config;
pub mod handle;
pub mod rbd;
mod runbook;
pub mod vocabulary;

/// Ceph's registration ([`crate::census::Registration`]).
pub const REGISTRATION: crate::census::Registration = crate::census::Registration {
    words: &vocabulary::CEPH,
    listers,
    released: Some(|bound| Box::pin(connections_released(bound))),
};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kube::runtime::reflector::Store;

use crate::census::ceph::config::ClusterConfig;
use crate::census::ceph::rbd::{Category, CephConfig, Cluster};
use crate::decide::census::{DiskFacts, FailureCategory, FailureKind, Scope, ScopeListing, Seen};
use crate::decide::classify::volume_source;
use crate::engine::clock::wall_clock;
use crate::model::crd::ImageOwner;
use crate::model::volume::Volume;
use handle::PoolKey;
use handle::image_ref;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::census::backend::{Lister, Reading};
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
async fn connections_released(bound: Duration) -> bool {
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

/// The lister of one Ceph cluster (its pools, in order): keeps its connection between listings
/// (a failure that aborts a census drops it, and the next listing connects again) and the ids
/// of its pools (ceph-csi's handles may name a pool by id).
pub(crate) struct CephLister {
    cluster: ClusterConfig,
    settings: CensusSettings,
    conn: Kept,
    pool_ids: HashMap<PoolKey, i64>,
}

/// One lister per configured cluster.
pub(crate) fn listers(settings: &CensusSettings) -> Vec<Box<dyn Lister>> {
    settings
        .config
        .clusters
        .iter()
        .map(|cluster| {
            Box::new(CephLister {
                cluster: cluster.clone(),
                settings: settings.clone(),
                conn: Kept(None),
                pool_ids: HashMap::new(),
            }) as Box<dyn Lister>
        })
        .collect()
}

impl Lister for CephLister {
    fn scopes(&self) -> Vec<Scope> {
        self.keys().into_iter().map(Scope::from).collect()
    }

    fn list<'a>(&'a mut self, reading: Reading<'a>) -> BoxFuture<'a, Vec<CensusReport>> {
        Box::pin(self.turn(reading))
    }

    fn reads_details_apart(&self) -> bool {
        true
    }
}

impl CephLister {
    fn keys(&self) -> Vec<PoolKey> {
        let c = &self.cluster;
        c.pools
            .iter()
            .map(|p| PoolKey::new(&c.cluster_id, &p.name, p.rados_namespace.as_deref()))
            .collect()
    }

    /// What to read of each image of pool `key`, as `reading` says: the images a volume names
    /// (or not asked about in detail) for their sizes, the others in full.
    fn ask_of(&self, key: &PoolKey, reading: Reading<'_>) -> impl Fn(&str) -> rbd::Ask + use<> {
        let (detailed, sizes): (Option<HashSet<String>>, Option<HashSet<String>>) = match reading {
            Reading::Operator(pvs) => (
                None,
                Some(referenced(pvs, key, self.pool_ids.get(key).copied())),
            ),
            Reading::Names => (Some(HashSet::new()), None),
            Reading::Sizes => (Some(HashSet::new()), Some(HashSet::new())),
            Reading::Details(d) => (
                Some(d.get(&vocabulary::pool(key)).cloned().unwrap_or_default()),
                Some(HashSet::new()),
            ),
        };
        move |name: &str| match (&detailed, &sizes) {
            // The operator: a named image's size, any other in full.
            (None, Some(named)) if named.contains(name) => rbd::Ask::Size,
            (None, _) => rbd::Ask::Detail,
            (Some(d), _) if d.contains(name) => rbd::Ask::Detail,
            (Some(_), Some(_)) => rbd::Ask::Size,
            (Some(_), None) => rbd::Ask::Name,
        }
    }

    /// One listing: connects if no connection is kept, censuses the pools in order, and
    /// reports every pool, censused or not.
    async fn turn(&mut self, reading: Reading<'_>) -> Vec<CensusReport> {
        let keys = self.keys();
        let mut reports = Vec::with_capacity(keys.len());
        if self.conn.0.is_none() {
            let started = Instant::now();
            match connect(&self.cluster, &self.settings).await {
                Ok(c) => self.conn.0 = Some(Arc::new(c)),
                Err(e) => {
                    return keys
                        .into_iter()
                        .map(|key| CensusReport {
                            key: key.into(),
                            result: Err(e.clone()),
                            requests: 0,
                            elapsed: started.elapsed(),
                        })
                        .collect();
                }
            }
        }
        for (n, pool) in self.cluster.pools.iter().enumerate() {
            let key = keys[n].clone();
            let Some(c) = self.conn.0.clone() else {
                break;
            };
            let ask = self.ask_of(&key, reading);
            let (report, abort) = census_pool(c, &key, pool, self.settings.deadline, ask).await;
            if let Ok(s) = &report.result
                && let Some(id) = s.scope_id
            {
                self.pool_ids.insert(key.clone(), id);
            }
            if abort {
                self.conn = Kept(None);
            }
            let failed = report.result.as_ref().err().map(|f| f.kind);
            reports.push(report);
            if let Some(kind) = failed
                && self.conn.0.is_none()
            {
                // The rest of this cluster's pools would wait out the same timeout: they are
                // unknown too, and are tried again next time.
                reports.extend(not_censused(&keys[n + 1..], &key, kind));
                break;
            }
        }
        reports
    }
}

/// The reports of the pools of `rest`, not censused, with the category of the failure of pool
/// `failed` that ended its cluster's turn.
fn not_censused(rest: &[PoolKey], failed: &PoolKey, kind: FailureKind) -> Vec<CensusReport> {
    rest.iter()
        .map(|key| CensusReport {
            key: key.clone().into(),
            result: Err(CensusFailure::new(
                kind,
                format!("not censused: the census of pool {failed} failed first"),
            )),
            requests: 0,
            elapsed: Duration::ZERO,
        })
        .collect()
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
                    users_only: 0,
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
