//! What a pool's census result does to the loop's state (and a volume naming an image that
//! was reported as referenced by nothing).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::Loop;
use super::effects::Log;
use crate::census::CensusReport;
use crate::census::volume_disk;
use crate::decide::census::Resolved;
use crate::model::crd::Reason;
use crate::model::volume::Volume;
use crate::run::scheduling::Scheduler;
use crate::run::wiring::Stores;

impl Loop {
    /// A scope's census completed (or failed): what it means is decided by
    /// [`census_result`](crate::decide::census_result::census_result); here it is logged,
    /// measured and the names it concerns are decided again.
    fn on_census(
        &mut self,
        report: CensusReport,
        wall: &Time,
        naming: &mut Option<crate::decide::census_result::Naming>,
        contents_current: bool,
    ) {
        use crate::decide::census_result::{Gauge, census_result};
        let Some(cs) = self.census.as_mut() else {
            return;
        };
        let CensusReport {
            key,
            result,
            requests,
            elapsed,
        } = report;
        let (stores, scheduler) = (&self.stores, &mut self.scheduler);
        let out = census_result(
            cs,
            &key,
            result.map_err(|e| (e.kind, e.message)),
            wall,
            || {
                &*naming
                    .get_or_insert_with(|| Self::census_naming(stores, scheduler, contents_current))
            },
        );
        self.gauge(match out.gauge {
            Gauge::Done { images, unread } => super::effects::Gauge::CensusDone {
                scope: key.clone(),
                images,
                unread,
                seconds: elapsed.as_secs_f64(),
                requests,
            },
            Gauge::Failed => super::effects::Gauge::CensusFailed {
                scope: key.clone(),
                requests,
            },
        });
        for line in out.logs {
            self.log(Log::Census {
                scope: key.clone(),
                line,
            });
        }
        for n in out.mark {
            self.scheduler.mark(&n);
        }
    }

    /// What names disks and backend snapshots now, as the stores and the tombstones not
    /// written yet say (the snapshots only when the content store is current).
    fn census_naming(
        stores: &Stores,
        scheduler: &mut Scheduler,
        contents_current: bool,
    ) -> crate::decide::census_result::Naming {
        let snapshot_handles = contents_current.then(|| Self::snapshot_handles(stores, scheduler));
        crate::decide::census_result::Naming {
            snapshot_handles,
            volumes: stores
                .pv
                .state()
                .iter()
                .filter_map(|pv| {
                    let spec = pv.spec.as_ref()?;
                    let disk = volume_disk(spec);
                    Some((pv.name().to_string(), disk))
                })
                .collect(),
            leftovers: stores
                .vl
                .state()
                .iter()
                .filter_map(|o| {
                    let s = o.status.as_ref().filter(|_| o.managed)?;
                    let source = (s.reason == Reason::VolumeDeleted)
                        .then(|| s.record().map(|r| r.source))
                        .flatten();
                    Some((o.name.to_string(), s.reason, source))
                })
                .collect(),
            // Tombstones not written yet (a delete just watched) name their image too.
            tombstones: scheduler
                .names_where(|st| st.memo().is_some_and(|m| m.tombstone.is_some()))
                .into_iter()
                .filter_map(|n| {
                    let t = scheduler.memo(&n).tombstone.as_deref()?;
                    Some(t.status.source.clone())
                })
                .collect(),
        }
    }

    /// Every backend snapshot named now: each content's handles, each `ContentDeleted`
    /// tombstone's (written, or not yet).
    fn snapshot_handles(stores: &Stores, scheduler: &mut Scheduler) -> Vec<String> {
        let mut handles: Vec<String> = stores
            .vsc
            .state()
            .iter()
            .flat_map(|c| {
                let status = c.status.as_ref().and_then(|s| s.snapshot_handle.as_deref());
                let source = c.spec.source.snapshot_handle.as_deref();
                status.into_iter().chain(source).map(str::to_string)
            })
            .collect();
        let recorded = |s: &crate::model::crd::VolumeLeftoverStatus| {
            (s.reason == Reason::ContentDeleted)
                .then(|| s.snapshot.as_ref()?.snapshot_handle.clone())
                .flatten()
        };
        handles.extend(
            stores
                .vl
                .state()
                .iter()
                .filter(|o| o.managed)
                .filter_map(|o| {
                    let s = o.status.as_ref()?;
                    (s.reason == Reason::ContentDeleted)
                        .then(|| recorded(&s.record()?))
                        .flatten()
                }),
        );
        for n in scheduler.names_where(|st| st.memo().is_some_and(|m| m.tombstone.is_some())) {
            if let Some(h) = scheduler
                .memo(&n)
                .tombstone
                .as_deref()
                .and_then(|t| recorded(&t.status))
            {
                handles.push(h);
            }
        }
        handles
    }

    /// A content names a backend snapshot that was reported as named by nothing: that finding
    /// goes.
    fn snapshot_named(&mut self, content: &crate::model::snapshot::SnapshotContent) {
        let Some(cs) = self.census.as_mut() else {
            return;
        };
        let status = content
            .status
            .as_ref()
            .and_then(|s| s.snapshot_handle.as_deref());
        let source = content.spec.source.snapshot_handle.as_deref();
        for r in status
            .into_iter()
            .chain(source)
            .filter_map(|h| cs.census.snapshot_ref(h))
        {
            let names: Vec<String> = cs
                .census
                .pools
                .keys()
                .filter_map(|scope| {
                    let n = r.name_in(scope)?;
                    Some(crate::decide::census::disk_leftover_name(scope, n))
                })
                .collect();
            for name in names {
                if cs.orphans.remove(&name).is_some() {
                    self.scheduler.mark(&name);
                }
            }
        }
    }

    /// A content was deleted at `wall`: the snapshot it named still counts as named for the
    /// listings that began before.
    fn content_deleted(&mut self, content: &crate::model::snapshot::SnapshotContent, wall: &Time) {
        let Some(cs) = self.census.as_mut() else {
            return;
        };
        let status = content
            .status
            .as_ref()
            .and_then(|s| s.snapshot_handle.as_deref());
        let source = content.spec.source.snapshot_handle.as_deref();
        cs.content_gone(status.into_iter().chain(source).map(str::to_string), wall);
    }

    /// A volume was deleted at `wall`: its disk stays named for the listings that began
    /// before (see [`CensusState::volume_gone`](crate::decide::census_result::CensusState::volume_gone)).
    fn volume_deleted(&mut self, pv: &Volume, wall: &Time) {
        let Some(cs) = self.census.as_mut() else {
            return;
        };
        if let Some(r) = pv.spec.as_ref().and_then(volume_disk) {
            cs.volume_gone(r, wall);
        }
    }

    /// A volume names an image that was reported as referenced by nothing: that finding goes.
    fn image_referenced(&mut self, pv: &Volume) {
        let Some(cs) = self.census.as_mut() else {
            return;
        };
        let Some(r) = pv.spec.as_ref().and_then(volume_disk) else {
            return;
        };
        let Resolved::In(key) = cs.census.resolve(&r) else {
            return;
        };
        let name = crate::decide::census::disk_leftover_name(key, r.name());
        let held = cs.held.remove(&name).is_some();
        if cs.orphans.remove(&name).is_some() || held {
            self.scheduler.mark(&name);
        }
    }
}

impl Loop {
    /// [`Loop::on_census`] for each report that arrived together, for the rest of the loop.
    /// What names disks is read once for all of them: it is every PV's disk and every
    /// tombstone's record, the same for each of a GCE listing's twenty zones and regions, and
    /// nothing the reports do changes it (they change the census and mark names, not the stores
    /// or what the scheduler keeps).
    pub(super) fn census_done(
        &mut self,
        reports: Vec<CensusReport>,
        wall: &Time,
        now: tokio::time::Instant,
    ) {
        use crate::telemetry::{Kind, Trust};
        let contents_current =
            self.health.trust(Kind::volumesnapshotcontents, now) == Trust::Current;
        let mut naming = None;
        for report in reports {
            self.on_census(report, wall, &mut naming, contents_current);
        }
    }

    /// [`Loop::content_deleted`], for the rest of the loop.
    pub(super) fn content_gone(
        &mut self,
        content: &crate::model::snapshot::SnapshotContent,
        wall: &Time,
    ) {
        self.content_deleted(content, wall);
    }

    /// [`Loop::snapshot_named`], for the rest of the loop.
    pub(super) fn content_names_snapshot(
        &mut self,
        content: &crate::model::snapshot::SnapshotContent,
    ) {
        self.snapshot_named(content);
    }

    /// [`Loop::volume_deleted`], for the rest of the loop.
    pub(super) fn volume_gone(&mut self, pv: &Volume, wall: &Time) {
        self.volume_deleted(pv, wall);
    }

    /// [`Loop::image_referenced`], for the rest of the loop.
    pub(super) fn volume_names_image(&mut self, pv: &Volume) {
        self.image_referenced(pv);
    }
}
