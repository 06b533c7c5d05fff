//! The async loop around [`Loop`]: it selects over the feeds, the role, the timers and the writes
//! in flight, and runs the writes. I/O.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::SelectAll;

use super::{Ended, Loop, Told};
use crate::publish::report::Applied;
use crate::publish::writer::{WriteError, Written};
use crate::run::wiring::InputStream;

/// A write in flight: the name, what it did, and the change to tell people about once it landed.
pub(super) type WriteFuture =
    Pin<Box<dyn Future<Output = (Arc<str>, Result<Written, WriteError>, Option<Told>)> + Send>>;

/// A ClusterReport write in flight: the content, and how it went.
pub(super) type ReportFuture = Pin<Box<dyn Future<Output = (serde_json::Value, Applied)> + Send>>;

impl Loop {
    /// Reads the inputs, the role, the written and the timers until `shutdown` resolves or this
    /// replica loses the Lease.
    pub(super) async fn serve(
        &mut self,
        inputs: &mut SelectAll<InputStream>,
        shutdown: impl Future<Output = ()>,
    ) -> Ended {
        let mut resync = tokio::time::interval(self.settings.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.tick().await;
        let mut report_tick = tokio::time::interval(Duration::from_secs(5));
        report_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ages = tokio::time::interval(Duration::from_secs(15));
        ages.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reminder = tokio::time::interval(self.settings.reminder);
        reminder.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        reminder.tick().await;
        tokio::pin!(shutdown);

        let l = self;
        loop {
            tokio::select! {
                () = &mut shutdown => return Ended::Stopped,
                Ok(()) = l.role.changed() => {
                    if l.on_role() == Some(Ended::LostLease) {
                        return Ended::LostLease;
                    }
                }
                Some(input) = inputs.next() => {
                    l.heap_used = true;
                    l.on_input(input);
                }
                _ = l.scheduler.next_wake() => {}
                Some((name, result, told)) = l.writes.next(), if !l.writes.is_empty() => {
                    l.heap_used = true;
                    l.on_written(&name, result, told);
                }
                _ = resync.tick() => {
                    if l.scheduler.is_active() {
                        tracing::debug!("periodic sweep");
                        l.sweep();
                    }
                }
                _ = reminder.tick() => l.remind(),
                _ = ages.tick() => {
                    l.refresh_ages();
                    if let Some(e) = &l.events {
                        e.tidy();
                    }
                    if std::mem::take(&mut l.heap_used) {
                        crate::engine::heap::release();
                    }
                }
                _ = report_tick.tick() => l.report(),
                Some((content, applied)) = async {
                    match l.report.as_mut() {
                        Some(r) if !r.in_flight.is_empty() => r.in_flight.next().await,
                        _ => std::future::pending().await,
                    }
                } => l.reported(content, applied),
            }
            l.dispatch();
        }
    }

    /// Lets writes in flight finish, within a bound; new ones are not started. What is still
    /// in flight then is abandoned.
    pub(super) async fn drain(&mut self) {
        let pending = self.writes.len();
        let drained = tokio::time::timeout(self.settings.shutdown_grace, async {
            while let Some((name, result, told)) = self.writes.next().await {
                self.on_written(&name, result, told);
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                abandoned = self.writes.len(),
                of = pending,
                "writes still in flight after the shutdown grace period were abandoned"
            );
        }
        drop(std::mem::take(&mut self.writes));
    }
}
