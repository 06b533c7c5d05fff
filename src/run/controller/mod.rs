//! The operator's loop: four feeds in, decisions out, one writer. I/O.
//!
//! One task owns all state. It reads four feeds (PVs, claim metadata, StorageClasses and its own
//! VolumeLeftovers; see [`crate::watch::feed`]), keeps the reverse index and the health of each store,
//! and hands PV names to the [`Scheduler`](crate::engine::schedule::Scheduler), which says when each may be decided and which writes
//! may start. Decisions are pure ([`crate::decide::classify`], [`crate::decide::plan`]); this module only gathers
//! their inputs, keeps the books (metrics, logs once per change, both as effects) and runs the
//! writes ([`crate::publish::writer`]).
//!
//! Nothing is decided before every store it depends on has listed: an empty claim cache at
//! start-up would otherwise turn every Released PV into "claim deleted". A store whose watch has
//! been failing for longer than `stale_after` answers nothing: decisions that need it wait, and
//! nothing published is changed or deleted on its account.
//!
//! - [`machine`]: the loop as a state machine: events and the time in, effects out (no task,
//!   no request);
//! - [`shell`]: the async loop around it: reads the feeds, timers and clocks, performs the
//!   effects;
//! - [`effects`]: the lines to log and the metric changes, as values;
//! - [`feeds`]: what the feeds' items do to the loop's state;
//! - [`census`]: what a pool's census result does to the loop's state;
//! - [`decision`]: the views of the stores a decision reads, and one name's decision.

mod census;
mod decision;
mod effects;
mod feeds;
mod machine;
mod shell;

use std::future::Future;
use std::sync::Arc;

use kube::Client;

use crate::run::settings::Settings;
use crate::run::wiring::{self, Wired};
use crate::telemetry::{Health, Metrics};

pub use decision::{StoreLookup, View};
pub(crate) use effects::{Gauge, Log, StoreLog, WatchLog};
pub(crate) use machine::{Effects, Event, Loop, Tick};
use shell::Shell;

pub(crate) use crate::decide::name::Told;

/// How the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shut down as asked.
    Stopped,
    /// This replica led and lost the Lease: it must not write again. The process exits so that
    /// a fresh one starts as a standby.
    LostLease,
}

/// Runs the controller until `shutdown` resolves. Returns only then: every error on the way
/// (API outage, missing CRD, 403) is logged once per change, counted and retried with backoff.
pub async fn run(
    client: Client,
    settings: Settings,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) -> Ended {
    let Wired {
        mut inputs,
        parts,
        mut tasks,
    } = wiring::wire(client, &settings, &health, &metrics);
    let mut l = Shell::new(parts, settings, health, metrics);
    let ended = l.serve(&mut inputs, shutdown).await;
    l.machine.health.shutting_down();
    drop(inputs);
    tasks.stop_census(l.machine.settings.shutdown_grace).await;
    l.drain().await;
    // Only now, with no write of ours in flight, may another replica take over.
    tasks.stop_election().await;
    tracing::info!("controller stopped");
    ended
}
