//! Leader election with a `coordination.k8s.io/v1` Lease, so that of several replicas exactly one
//! decides and writes. I/O around a pure decision ([`next_step`]).
//!
//! The algorithm is client-go's: a lease is expired when it has not changed for its duration as
//! measured on *this* process's clock since it was last observed to change (so clock skew between
//! replicas does not matter); a holder renews it well before that; every write (a create, or a
//! merge patch) carries the resourceVersion it was decided on, so two candidates never both win;
//! the holder releases it on shutdown. RBAC: get, patch and watch on this one Lease, create. Unlike kube-lease-manager (whose standby sleeps until the holder's lease would expire,
//! so a released lease is noticed only a lease duration later), a standby here also watches its
//! Lease, and takes over a released lease at once: a rolling update hands over in about a second.
//!
//! A holder that cannot confirm a renewal before its lease would expire on the other replicas'
//! clocks stops deciding: the controller then exits so that a fresh process starts as standby.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::watch::category::{Category, describe};

/// Configuration of the election.
#[derive(Clone, Debug)]
pub struct LeaderSettings {
    /// Name of the Lease.
    pub(crate) lease_name: String,
    /// Namespace of the Lease.
    pub(crate) namespace: String,
    /// This replica's identity (its pod name).
    pub(crate) identity: String,
    /// How long a lease lasts without renewal.
    pub(crate) duration: Duration,
    /// How often the holder renews it (well under `duration`).
    pub(crate) renew_every: Duration,
}

/// How often a holder renews a lease of `duration`: every third of it, so that a renewal can
/// fail twice before the lease runs out on the other replicas' clocks.
pub fn renew_every(duration: Duration) -> Duration {
    duration / 3
}

/// How long one request of the election (the GET, a create, a patch, the release) may take:
/// at most 5 s, and never longer than the renewal period, so that one hung request cannot make
/// the holder miss its renewal.
pub fn request_timeout(renew_every: Duration) -> Duration {
    Duration::from_secs(5).min(renew_every)
}

/// The longest a standby takes to lead after the holder stopped without releasing its lease
/// (`kill -9`, a lost node), counted from the holder's last renewal as the standby saw it (its
/// watch of the Lease delivers it at once on a healthy server): the lease's `duration` on the
/// standby's own clock, then one GET that finds the lease unchanged and one patch that takes it,
/// each bounded by [`request_timeout`]. It cannot be shorter than `duration` minus
/// [`renew_every`]: the last renewal is at most that old when the holder dies.
pub fn takeover_bound(duration: Duration) -> Duration {
    duration + request_timeout(renew_every(duration)) * 2
}

/// What this replica may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// There is no election (one replica): this process decides and writes for as long as it
    /// runs.
    Unelected,
    /// Another replica leads (or none yet): keep the caches warm, decide nothing.
    Standby,
    /// This replica leads until `until` (its own clock): decide and write.
    Leading {
        /// Writes may start until then.
        until: Instant,
    },
    /// This replica led and could not renew in time, or its lease was taken: stop.
    Lost,
}

impl Role {
    /// Whether writes may start now.
    pub(crate) fn may_write(&self, now: Instant) -> bool {
        match self {
            Role::Unelected => true,
            Role::Leading { until } => now < *until,
            Role::Standby | Role::Lost => false,
        }
    }

    /// Whether this replica is the one that decides (its lease may still run out: see
    /// [`Role::may_write`]).
    pub(crate) fn leads(&self) -> bool {
        matches!(self, Role::Unelected | Role::Leading { .. })
    }
}

use crate::telemetry::Standing;

impl Standing {
    /// The standby of the Lease `s` names.
    pub(crate) fn standby(s: &LeaderSettings) -> Standing {
        Standing::Standby {
            lease: format!("{}/{}", s.namespace, s.lease_name),
        }
    }
}

/// The lease as last observed, and when this process saw it change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    /// `spec.holderIdentity`, empty when released.
    pub(crate) holder: String,
    /// `spec.leaseDurationSeconds` of the holder.
    pub(crate) duration: Duration,
    /// `spec.leaseTransitions`.
    pub(crate) transitions: i32,
    /// `metadata.resourceVersion`: every write is conditional on it.
    pub(crate) resource_version: String,
    /// When this process saw the holder or renewTime change (its own clock).
    pub(crate) changed_at: Instant,
}

/// The next thing to do, given what was observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// No lease yet: create one holding it.
    Create,
    /// Take the lease (free, or expired on this clock).
    Acquire,
    /// Renew our own lease at `at`.
    Renew {
        /// When.
        at: Instant,
    },
    /// Someone else holds it: look again at `at` (or when the watch shows a change).
    Wait {
        /// When it would expire on this clock.
        at: Instant,
    },
}

/// The pure decision: what to do about `observed` at `now`.
pub(crate) fn next_step(
    observed: Option<&Observed>,
    me: &str,
    s: &LeaderSettings,
    now: Instant,
) -> Step {
    let Some(o) = observed else {
        return Step::Create;
    };
    if o.holder == me {
        return Step::Renew {
            at: o.changed_at + s.renew_every,
        };
    }
    let expires = o.changed_at + o.duration;
    if o.holder.is_empty() || now >= expires {
        Step::Acquire
    } else {
        Step::Wait { at: expires }
    }
}

fn observe(l: &Lease, previous: Option<&Observed>, now: Instant) -> Observed {
    let spec = l.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let duration = Duration::from_secs(
        u64::try_from(spec.lease_duration_seconds.unwrap_or(15).max(1)).unwrap_or(15),
    );
    let resource_version = l.metadata.resource_version.clone().unwrap_or_default();
    // A change of holder or renewal is a sign of life; the same record seen again is not.
    let changed_at = match previous {
        Some(p) if p.resource_version == resource_version => p.changed_at,
        _ => now,
    };
    Observed {
        holder,
        duration,
        transitions: spec.lease_transitions.unwrap_or(0),
        resource_version,
        changed_at,
    }
}

fn held_by(me: &str, s: &LeaderSettings, previous: Option<&Observed>, now: Instant) -> Lease {
    let t = MicroTime(jiff::Timestamp::now());
    let transitions = previous.map_or(0, |p| {
        if p.holder == me {
            p.transitions
        } else {
            p.transitions.saturating_add(1)
        }
    });
    let _ = now;
    Lease {
        metadata: ObjectMeta {
            name: Some(s.lease_name.clone()),
            namespace: Some(s.namespace.clone()),
            resource_version: previous.map(|p| p.resource_version.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(me.to_string()),
            lease_duration_seconds: Some(i32::try_from(s.duration.as_secs()).unwrap_or(15)),
            acquire_time: if previous.is_some_and(|p| p.holder == me) {
                None
            } else {
                Some(t.clone())
            },
            renew_time: Some(t),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

/// Runs the election until `stop` turns true; publishes this replica's role. On stop, a holder
/// releases the lease (bounded in time) before returning.
pub(crate) async fn run(
    client: Client,
    s: LeaderSettings,
    role: watch::Sender<Role>,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &s.namespace);
    let mut e = Election::new(api, s, role);
    // Changes of the Lease, for a prompt takeover when the holder releases it.
    let (watcher, mut poke) = watch_lease(e.api.clone(), e.s.lease_name.clone());
    loop {
        let now = Instant::now();
        e.read(now).await;
        // The pure decision, then the write it calls for (if any is due).
        let step = next_step(e.observed.as_ref(), &e.me, &e.s, now);
        let write = e.write(&step, now).await;
        e.settle(write, now);
        if e.lost() {
            watcher.abort();
            return;
        }
        // Wait until the next step is due, a change of the Lease, or stop.
        let wake = e.wake();
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            _ = tokio::time::sleep_until(wake) => {}
            _ = poke.changed() => {}
        }
    }
    watcher.abort();
    e.release().await;
    let _ = e.role.send(Role::Standby);
}

/// What one replica's election knows between rounds, and the means to read and write its Lease.
struct Election {
    api: Api<Lease>,
    s: LeaderSettings,
    me: String,
    role: watch::Sender<Role>,
    /// How long one request may take ([`request_timeout`]).
    request: Duration,
    observed: Option<Observed>,
    /// Set once this replica has led: writes stop then (its own clock).
    leading_until: Option<Instant>,
    last_error: Option<Category>,
    retry: crate::engine::backoff::Backoff,
}

/// The outcome of a write of the Lease: none, a timeout, or the server's answer.
type Written = Option<Result<kube::Result<Lease>, tokio::time::error::Elapsed>>;

impl Election {
    fn new(api: Api<Lease>, s: LeaderSettings, role: watch::Sender<Role>) -> Election {
        let me = s.identity.clone();
        let retry = crate::engine::backoff::Backoff::new(
            Duration::from_millis(200),
            Duration::from_secs(5),
            crate::engine::backoff::seed(&me),
        );
        Election {
            api,
            request: request_timeout(s.renew_every),
            s,
            me,
            role,
            observed: None,
            leading_until: None,
            last_error: None,
            retry,
        }
    }

    /// Refreshes the observation (a GET is cheap and authoritative).
    async fn read(&mut self, now: Instant) {
        match tokio::time::timeout(self.request, self.api.get_opt(&self.s.lease_name)).await {
            Ok(Ok(l)) => {
                self.observed = l.map(|l| observe(&l, self.observed.as_ref(), now));
                self.last_error = None;
            }
            Ok(Err(e)) => note_error(&mut self.last_error, Category::of(&e), &describe(&e)),
            Err(_) => note_error(&mut self.last_error, Category::Timeout, "no answer"),
        }
    }

    /// Carries out `step` if it is a write that is due: creates the Lease, or takes or renews it
    /// (not while the last read failed).
    async fn write(&self, step: &Step, now: Instant) -> Written {
        let pp = PostParams {
            field_manager: Some("volume-leftovers".into()),
            ..PostParams::default()
        };
        match step {
            Step::Create => {
                let l = held_by(&self.me, &self.s, None, now);
                Some(tokio::time::timeout(self.request, self.api.create(&pp, &l)).await)
            }
            Step::Acquire | Step::Renew { .. } if self.last_error.is_none() => {
                let due = match step {
                    Step::Renew { at } => *at <= now,
                    _ => true,
                };
                if due {
                    let l = held_by(&self.me, &self.s, self.observed.as_ref(), now);
                    let w = patch(&self.api, &self.s.lease_name, &l);
                    Some(tokio::time::timeout(self.request, w).await)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// Takes in the outcome of a write: on success this replica leads (and says so) until
    /// shortly before the lease would run out; a refused write means looking again.
    fn settle(&mut self, write: Written, now: Instant) {
        match write {
            Some(Ok(Ok(l))) => {
                // Our own write: we hold it from the moment we sent it.
                let o = observe(&l, None, now);
                if o.holder == self.me {
                    self.publish_leading(o.duration, now);
                }
                self.observed = Some(o);
                self.retry.reset();
            }
            Some(Ok(Err(e))) => {
                let c = Category::of(&e);
                if c != Category::Conflict && c != Category::NotFound {
                    note_error(&mut self.last_error, c, &describe(&e));
                }
                // Someone else won, or the record changed: look again shortly.
                self.observed = None;
            }
            Some(Err(_)) => note_error(&mut self.last_error, Category::Timeout, "no answer"),
            None => {}
        }
    }

    /// Publishes [`Role::Leading`] for a lease of `duration` written at `now`.
    fn publish_leading(&mut self, duration: Duration, now: Instant) {
        // Other replicas count the duration from when they see this change, later than `now`:
        // stopping at now + duration keeps us inside their view.
        let until = now + duration.saturating_sub(self.s.renew_every.min(duration / 3));
        self.leading_until = Some(until);
        if !matches!(*self.role.borrow(), Role::Leading { .. }) {
            tracing::info!(lease = %self.s.lease_name, identity = %self.me, "leading");
        }
        let _ = self.role.send(Role::Leading { until });
    }

    /// Whether a holder could not renew in time or saw its lease taken; then it says so and
    /// publishes [`Role::Lost`].
    fn lost(&self) -> bool {
        let Some(until) = self.leading_until else {
            return false;
        };
        if Instant::now() >= until || (!self.holds() && self.observed.is_some()) {
            tracing::error!(lease = %self.s.lease_name, identity = %self.me, "lost the lease");
            let _ = self.role.send(Role::Lost);
            return true;
        }
        false
    }

    /// Whether the lease as last observed is this replica's.
    fn holds(&self) -> bool {
        self.observed.as_ref().is_some_and(|o| o.holder == self.me)
    }

    /// When the next step is due; sooner (with backoff) after an error.
    fn wake(&mut self) -> Instant {
        let wake = match next_step(self.observed.as_ref(), &self.me, &self.s, Instant::now()) {
            Step::Renew { at } | Step::Wait { at } => at,
            Step::Create | Step::Acquire => Instant::now() + self.retry.next_delay(),
        };
        if self.last_error.is_some() {
            wake.min(Instant::now() + self.retry.next_delay())
        } else {
            wake
        }
    }

    /// Releases a held lease at once so that a standby takes over without waiting for it to
    /// expire.
    async fn release(&self) {
        if self.leading_until.is_none() || !self.holds() {
            return;
        }
        let rv = self
            .observed
            .as_ref()
            .map(|o| o.resource_version.clone())
            .unwrap_or_default();
        let release = serde_json::json!({
            "metadata": {"resourceVersion": rv},
            "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null},
        });
        let pp = kube::api::PatchParams {
            field_manager: Some("volume-leftovers".into()),
            ..Default::default()
        };
        let name = &self.s.lease_name;
        let release = kube::api::Patch::Merge(&release);
        let patch = self.api.patch(name, &pp, &release);
        match tokio::time::timeout(self.request, patch).await {
            Ok(Ok(_)) => tracing::info!(lease = %name, "released the lease"),
            Ok(Err(e)) => {
                tracing::warn!(error = %describe(&e), "could not release the lease; it expires on its own")
            }
            Err(_) => tracing::warn!("releasing the lease timed out; it expires on its own"),
        }
    }
}

/// Watches the Lease `name` and pokes the receiver on every change (added or modified),
/// re-watching a second after a watch ends, until the receiver is dropped or the task aborted.
fn watch_lease(
    api: Api<Lease>,
    name: String,
) -> (tokio::task::JoinHandle<()>, watch::Receiver<()>) {
    let (poke_tx, poke) = watch::channel(());
    let watcher = tokio::spawn(async move {
        loop {
            let wp = WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(60);
            if let Ok(stream) = api.watch(&wp, "0").await {
                let mut stream = stream.boxed();
                while let Some(ev) = stream.next().await {
                    if matches!(ev, Ok(WatchEvent::Added(_) | WatchEvent::Modified(_))) {
                        let _ = poke_tx.send(());
                    }
                }
            }
            if poke_tx.is_closed() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    (watcher, poke)
}

/// Writes `l` over the Lease with a JSON merge patch that carries the resourceVersion it was
/// decided on: refused (409) if anyone changed the Lease since.
async fn patch(api: &Api<Lease>, name: &str, l: &Lease) -> kube::Result<Lease> {
    let pp = kube::api::PatchParams {
        field_manager: Some("volume-leftovers".into()),
        ..Default::default()
    };
    api.patch(name, &pp, &kube::api::Patch::Merge(l)).await
}

fn note_error(last: &mut Option<Category>, c: Category, message: &str) {
    if *last != Some(c) {
        tracing::warn!(category = c.as_str(), error = %message, "leader election: the Lease cannot be read or written; retrying");
    }
    *last = Some(c);
}
