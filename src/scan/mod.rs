//! `volume-leftovers scan`: one read of the cluster, the same classification, a report.
//! I/O: paginated lists (never one unbounded list, never one GET per PV); writes nothing.
//!
//! Claims and classes are listed first and folded into compact facts; then PVs are listed page
//! by page, each page classified and dropped, so only the findings and the facts stay in memory.
//! Because the claims were listed before the PVs, a claim created in between would look missing:
//! the few findings that rest on a claim being absent from a Bound or pre-bound volume are
//! checked again with one GET each before they are printed.

pub mod cloud;
pub mod output;
pub mod progress;
pub mod snapshots;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, ObjectList};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use crate::census::CensusSettings;
use crate::census::backend::{Lister, Reading};
use crate::census::volume_disk;
use crate::decide::census::{Census, DiskRef, Scope};
use crate::decide::classify::classify;
use crate::decide::lookup::{
    ClaimFacts, ClaimObject, ClassFacts, Found, Lookup, claim_facts, class_facts,
};
use crate::decide::plan::{Gated, Graces, gate};
use crate::engine::clock::wall_clock;
use crate::model::crd::{Hint, Reason, Tristate};
use crate::model::exclude::Exclusions;
use crate::model::finding::{Finding, Verdict};
use crate::model::price::PriceTable;
use crate::model::volume::{Volume, VolumeObject};
use crate::watch::category::{Category, RequestError};

/// Errors of a scan, by step.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// Listing or reading a kind failed (other than 403 on claims or classes).
    #[error("cannot {verb} {resource} from {server}: {source}{}", rejected(.credentials.as_deref()))]
    Read {
        /// The verb.
        verb: &'static str,
        /// The resource.
        resource: &'static str,
        /// The API server.
        server: String,
        /// Cause (boxed: a client error is large, and it is on the error path only).
        source: Box<RequestError>,
        /// Whose credentials the server rejected, on a 401 (its answer does not say).
        credentials: Option<String>,
    },
    /// Writing the report failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
}

impl ScanError {
    /// The category of a failed read; `None` for the report's own output.
    pub(crate) fn category(&self) -> Option<Category> {
        match self {
            ScanError::Read { source, .. } => Some(source.category()),
            ScanError::Output(_) => None,
        }
    }
}

/// The end of a [`ScanError::Read`] line after a 401: whose credentials were rejected.
fn rejected(credentials: Option<&str>) -> String {
    credentials
        .map(|c| format!(" (the credentials of {c} were rejected)"))
        .unwrap_or_default()
}

pub use output::Format;

/// Claims and classes as a scan read them: compact facts, no objects.
#[derive(Clone, Debug, Default)]
pub(crate) struct Facts {
    /// Claims by (namespace, name); `None` when claims could not be read (403).
    pub(crate) claims: Option<HashMap<(String, String), ClaimFacts>>,
    /// StorageClasses by name; `None` when classes could not be read (403).
    pub(crate) classes: Option<HashMap<String, ClassFacts>>,
    /// The storage backend's census, when asked for.
    pub(crate) census: Option<std::sync::Arc<Census>>,
}

impl Lookup for Facts {
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts> {
        match &self.claims {
            None => Found::Unknown,
            Some(m) => m
                .get(&(namespace.to_string(), name.to_string()))
                .cloned()
                .map_or(Found::Absent, Found::Yes),
        }
    }

    fn class(&self, name: &str) -> Found<ClassFacts> {
        match &self.classes {
            None => Found::Unknown,
            Some(m) => m.get(name).cloned().map_or(Found::Absent, Found::Yes),
        }
    }

    fn census(&self) -> Option<&Census> {
        self.census.as_deref()
    }
}

/// What a scan found.
#[derive(Clone, Debug, Default)]
pub struct ScanResult {
    /// Findings, sorted by PV name.
    pub findings: Vec<Finding>,
    /// Permissions that were missing (`list persistentvolumeclaims`, ...): the census is
    /// incomplete and its rows say null where they depend on them.
    pub missing: Vec<String>,
    /// Claims whose second look (a 403, a timeout) could not tell whether they exist, each with
    /// its volume and the error: their rows say `claim_missing: null`.
    pub unknown_claims: Vec<String>,
    /// Ceph pools and snapshot scopes whose census failed or is incomplete, each saying what
    /// is not known.
    pub census_failed: Vec<CensusGap>,
    /// The images each censused pool's volumes name.
    pub(crate) referenced: HashMap<Scope, HashSet<String>>,
    /// The GCE and EBS scopes whose listing failed (either of the two): nothing is said about
    /// their disks, and the report is incomplete.
    pub cloud_failed: Vec<cloud::ScopeFailure>,
    /// What the lines about cloud disks add, by the finding's name.
    pub(crate) disks: HashMap<String, cloud::DiskKeys>,
    /// The VolumeSnapshotContents and VolumeSnapshots, when they are served.
    pub snapshots: snapshots::SnapshotScan,
    /// Findings held back because their state has not lasted its grace (`--grace`,
    /// `--delete-grace`), as the operator holds them: not reported, and named on stderr with
    /// the time from which they would be. Sorted by name.
    pub held: Vec<Held>,
}

/// A Ceph pool or snapshot scope whose census failed or is incomplete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CensusGap {
    /// The scope (`fsid/pool`, `gce:p/snapshots`).
    pub scope: String,
    /// One line naming the census and the scope, saying what is not known.
    pub line: String,
}

impl std::fmt::Display for CensusGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

/// A finding `scan` held back: its state has not lasted its grace yet, so the operator would not
/// publish it either. It is not a leftover until then, and not "clean" either: the summary
/// names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The object's kind (`PersistentVolume`, `VolumeSnapshotContent`, `VolumeSnapshot`).
    pub kind: &'static str,
    /// Its name (`namespace/name` for a VolumeSnapshot).
    pub name: String,
    /// The finding it would be.
    pub reason: &'static str,
    /// When it would be, if nothing changes. For a state the objects do not date (a claim
    /// that vanished), a grace from this scan's own look: the operator, which has watched
    /// longer, may publish it earlier.
    pub until: Time,
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ({} from {})",
            self.kind,
            self.name,
            self.reason,
            self.until.0.strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    }
}

const PAGE: u32 = 500;

struct Reader {
    client: Client,
    server: String,
    timeout: Duration,
    progress: progress::Progress,
}

impl ScanError {
    /// A failed read of `resource` from `server`: the line names both, and on a 401 whose
    /// credentials were rejected.
    pub(crate) fn read(
        verb: &'static str,
        resource: &'static str,
        server: &str,
        source: RequestError,
    ) -> ScanError {
        // The server's answer does not say whose credentials it rejected.
        let credentials =
            (source.category() == Category::Unauthorized).then(crate::watch::client::credentials);
        ScanError::Read {
            verb,
            resource,
            server: server.to_string(),
            source: Box::new(source),
            credentials,
        }
    }
}

impl Reader {
    fn error(&self, verb: &'static str, resource: &'static str, source: RequestError) -> ScanError {
        ScanError::read(verb, resource, &self.server, source)
    }

    /// Lists `resource` page by page, folding each page with `fold`.
    async fn pages<K, F, Fut>(
        &self,
        resource: &'static str,
        mut page: F,
        mut fold: impl FnMut(Vec<K>),
    ) -> Result<(), ScanError>
    where
        F: FnMut(ListParams) -> Fut,
        Fut: std::future::Future<Output = kube::Result<ObjectList<K>>>,
        K: Clone,
    {
        let mut token: Option<String> = None;
        let mut listed = 0usize;
        loop {
            let mut lp = ListParams::default().limit(PAGE);
            if let Some(t) = token.take() {
                lp = lp.continue_token(&t);
            }
            let list = match tokio::time::timeout(self.timeout, page(lp)).await {
                Ok(Ok(list)) => list,
                Ok(Err(e)) => return Err(self.error("list", resource, RequestError::Client(e))),
                Err(_) => {
                    let source = RequestError::Timeout(self.timeout);
                    return Err(self.error("list", resource, source));
                }
            };
            let next = list.metadata.continue_.clone().filter(|t| !t.is_empty());
            listed += list.items.len();
            self.progress.step(format!("listing {resource}: {listed}"));
            fold(list.items);
            match next {
                Some(t) => token = Some(t),
                None => return Ok(()),
            }
        }
    }
}

/// The images a scan found named (by a PV or a tombstone), by censused pool.
pub(crate) type Referenced = HashMap<Scope, HashSet<String>>;

/// The PVs' verdicts, sorted by what must still be done with them.
#[derive(Default)]
pub(crate) struct Classified {
    /// Findings as they stand.
    pub(crate) findings: Vec<Finding>,
    /// Findings that rest on a claim being absent, with their volume, to be looked at again.
    pub(crate) recheck: Vec<(Volume, Finding)>,
}

impl Classified {
    /// One listed PV: the disk it names noted in `referenced` (when a censused pool holds it),
    /// then classified against `facts` at `now` and its verdict taken. Pure: what a page of PVs
    /// goes through, one by one.
    pub(crate) fn volume(
        &mut self,
        pv: Volume,
        facts: &Facts,
        now: &Time,
        referenced: &mut Referenced,
    ) {
        if let (Some(c), Some(r)) = (
            facts.census.as_deref(),
            pv.spec.as_ref().and_then(volume_disk),
        ) {
            note_reference(c, r, referenced);
        }
        let verdict = classify(&pv, facts, now.clone());
        self.take(pv, verdict);
    }

    fn take(&mut self, pv: Volume, verdict: Verdict) {
        match verdict {
            Verdict::Leftover(f) => {
                if rests_on_absence(&f) {
                    self.recheck.push((pv, *f));
                } else {
                    self.findings.push(*f);
                }
            }
            Verdict::Healthy | Verdict::Undecided(_) | Verdict::Ignored(_) => {}
            Verdict::Skip(why) => tracing::warn!("skipped: {why}"),
        }
    }
}

/// What a second look at one claim said.
enum SecondLook {
    /// The server answered (the claim exists or not): the volume's finding, if it still has one.
    Answered(Option<Box<Finding>>),
    /// No yes or no (a 403, a timeout): why.
    Unanswered(RequestError),
}

impl Reader {
    /// Every claim, as the compact facts classification needs: its metadata and what says its
    /// size (an expansion's request, capacity and resize status), read as [`ClaimObject`], the
    /// operator's claim type.
    async fn claims(&self) -> Result<HashMap<(String, String), ClaimFacts>, ScanError> {
        let api: Api<ClaimObject> = Api::all(self.client.clone());
        let mut claims = HashMap::new();
        self.pages(
            "persistentvolumeclaims",
            |lp| {
                let api = api.clone();
                async move { api.list(&lp).await }
            },
            |items| {
                for c in items {
                    let key = (
                        c.metadata.namespace.clone().unwrap_or_default(),
                        c.metadata.name.clone().unwrap_or_default(),
                    );
                    claims.insert(key, claim_facts(&c));
                }
            },
        )
        .await?;
        Ok(claims)
    }

    /// Every StorageClass, as the compact facts classification needs.
    async fn classes(&self) -> Result<HashMap<String, ClassFacts>, ScanError> {
        let api: Api<StorageClass> = Api::all(self.client.clone());
        let mut classes = HashMap::new();
        self.pages(
            "storageclasses",
            |lp| {
                let api = api.clone();
                async move { api.list(&lp).await }
            },
            |items| {
                for c in items {
                    classes.insert(c.name_any(), class_facts(&c));
                }
            },
        )
        .await?;
        Ok(classes)
    }

    /// Lists the PVs page by page and classifies each page as it comes, so that a page is
    /// dropped once read and only the verdicts stay in memory. Notes in `referenced` the images
    /// in censused pools that the PVs name: those are not orphans.
    async fn volumes(
        &self,
        facts: &Facts,
        exclusions: &Exclusions,
        now: &Time,
        referenced: &mut Referenced,
    ) -> Result<Classified, ScanError> {
        let api: Api<VolumeObject> = Api::all(self.client.clone());
        let mut out = Classified::default();
        self.pages(
            "persistentvolumes",
            |lp| {
                let api = api.clone();
                async move { api.list(&lp).await }
            },
            |items| {
                for pv in items {
                    out.volume(Volume::read(pv, exclusions), facts, now, referenced);
                }
            },
        )
        .await?;
        Ok(out)
    }

    /// The disks the PVs name now: read before the census's listings, so that a PV deleted
    /// while they ran (a Delete PV goes once its disk is deleted, which a listing may predate)
    /// still names its disk.
    async fn volume_disks(&self, exclusions: &Exclusions) -> Result<Vec<DiskRef>, ScanError> {
        let api: Api<VolumeObject> = Api::all(self.client.clone());
        let mut out = Vec::new();
        self.pages(
            "persistentvolumes",
            |lp| {
                let api = api.clone();
                async move { api.list(&lp).await }
            },
            |items| {
                out.extend(items.into_iter().filter_map(|pv| {
                    let pv = Volume::read(pv, exclusions);
                    let s = pv.spec.as_ref()?;
                    volume_disk(s)
                }))
            },
        )
        .await?;
        Ok(out)
    }

    /// The images the operator's tombstones name (`VolumeDeleted`: a Retain volume was deleted,
    /// its image kept) are someone's record, not orphans, as the operator sees them: they are
    /// noted in `referenced`. Without the CRD there are none (a 404 is no error).
    async fn tombstones(
        &self,
        census: &Census,
        referenced: &mut Referenced,
    ) -> Result<(), ScanError> {
        let api: Api<crate::model::crd::VolumeLeftover> = Api::all(self.client.clone());
        // A `ContentDeleted` tombstone names its backend snapshot as a `VolumeDeleted` one its
        // disk.
        let selector = format!(
            "{} in ({},{}),{}={}",
            crate::model::labels::LABEL_REASON,
            Reason::VolumeDeleted.as_str(),
            Reason::ContentDeleted.as_str(),
            crate::model::labels::MANAGED_BY,
            crate::model::labels::MANAGED_BY_VALUE
        );
        let listed = self
            .pages(
                "volumeleftovers",
                |lp| {
                    let api = api.clone();
                    let lp = lp.labels(&selector);
                    async move { api.list(&lp).await }
                },
                |items| {
                    for o in items {
                        let Some(s) = o.status.as_ref() else {
                            continue;
                        };
                        if s.reason == Reason::ContentDeleted {
                            let handle =
                                s.snapshot.as_ref().and_then(|i| i.snapshot_handle.clone());
                            note_snapshots(census, handle, referenced);
                        } else if let Some(r) = census.disk_ref(&s.source) {
                            note_reference(census, r, referenced);
                        }
                    }
                },
            )
            .await;
        match listed {
            Err(e) if e.category() == Some(Category::NotFound) => Ok(()),
            other => other,
        }
    }

    /// Claims were listed before the PVs: a claim created in between looks missing. Ask again.
    /// An answer that is not a yes or a no (403, a timeout) is reported as such: the row says
    /// the claim is unknown, and the scan is incomplete. A 403 is not a 404, and a volume whose
    /// claim is really gone must not vanish from the report because the second look failed.
    /// Returns the claims whose second look failed, one line each; `findings` gets the rest.
    async fn recheck(
        &self,
        recheck: Vec<(Volume, Finding)>,
        facts: &Facts,
        now: &Time,
        findings: &mut Vec<Finding>,
    ) -> Result<Vec<String>, ScanError> {
        let mut unknown_claims = Vec::new();
        if !recheck.is_empty() {
            self.progress.step(format!(
                "second looks: {} claim(s) that seemed missing",
                recheck.len()
            ));
        }
        for (pv, finding) in recheck {
            let spec = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
            let (Some(ns), Some(name)) = (
                spec.and_then(|r| r.namespace.as_deref()),
                spec.and_then(|r| r.name.as_deref()),
            ) else {
                findings.push(finding);
                continue;
            };
            match self.look_again(&pv, ns, name, facts, now).await? {
                SecondLook::Answered(f) => findings.extend(f.map(|f| *f)),
                SecondLook::Unanswered(failed) => {
                    unknown_claims.push(format!(
                        "claim {ns}/{name} of PersistentVolume {} could not be read again ({failed}); whether it exists is unknown",
                        finding.volume_name
                    ));
                    findings.push(claim_unknown(finding, &failed.to_string()));
                }
            }
        }
        Ok(unknown_claims)
    }

    /// One GET of the claim `ns/name` of `pv`, and `pv` classified again with its answer (the
    /// facts as listed, but for that one claim). Errors other than a 403 or a timeout end the
    /// scan, as a failed list does.
    async fn look_again(
        &self,
        pv: &Volume,
        ns: &str,
        name: &str,
        facts: &Facts,
        now: &Time,
    ) -> Result<SecondLook, ScanError> {
        let api: Api<ClaimObject> = Api::namespaced(self.client.clone(), ns);
        let failed = match tokio::time::timeout(self.timeout, api.get_opt(name)).await {
            Ok(Ok(c)) => {
                let mut one = facts.clone();
                if let (Some(claims), Some(c)) = (one.claims.as_mut(), c) {
                    claims.insert((ns.to_string(), name.to_string()), claim_facts(&c));
                }
                let again = match classify(pv, &one, now.clone()) {
                    Verdict::Leftover(f) => Some(f),
                    _ => None,
                };
                return Ok(SecondLook::Answered(again));
            }
            Ok(Err(e)) => RequestError::Client(e),
            Err(_) => RequestError::Timeout(self.timeout),
        };
        if !matches!(failed.category(), Category::Forbidden | Category::Timeout) {
            return Err(self.error("get", "persistentvolumeclaims", failed));
        }
        Ok(SecondLook::Unanswered(failed))
    }
}

/// Notes that a PV or a tombstone names `image`, when the image lies in one censused pool (an
/// image in no censused pool, or in one not yet known, is not the census's to call an orphan).
fn note_reference(census: &Census, image: DiskRef, referenced: &mut Referenced) {
    if let crate::decide::census::Resolved::In(key) = census.resolve(&image) {
        referenced
            .entry(key.clone())
            .or_default()
            .insert(image.name().to_string());
    }
}

/// Notes in `referenced` the backend snapshots the handles name, in each censused snapshot
/// scope that can hold them.
pub(crate) fn note_snapshots(
    census: &Census,
    handles: impl IntoIterator<Item = String>,
    referenced: &mut Referenced,
) {
    for r in handles.into_iter().filter_map(|h| census.snapshot_ref(&h)) {
        for scope in census.pools.keys() {
            if let Some(name) = r.name_in(scope) {
                referenced
                    .entry(scope.clone())
                    .or_default()
                    .insert(name.to_string());
            }
        }
    }
}

/// A listing that may be forbidden: a 403 does not end the scan but leaves a hole in it, named
/// in `missing` (the permission it lacked) so that the report says it is incomplete.
fn unless_forbidden<T>(
    listed: Result<T, ScanError>,
    permission: &str,
    missing: &mut Vec<String>,
) -> Result<Option<T>, ScanError> {
    match listed {
        Ok(v) => Ok(Some(v)),
        Err(e) if forbidden(&e) => {
            missing.push(permission.to_string());
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn forbidden(e: &ScanError) -> bool {
    e.category() == Some(Category::Forbidden)
}

/// Reads claims and classes (compact), then PVs page by page, and classifies them.
pub async fn read(
    client: Client,
    server: &str,
    timeout: Duration,
    exclusions: &Exclusions,
    census: Option<std::sync::Arc<Census>>,
    progress: &progress::Progress,
) -> Result<ScanResult, ScanError> {
    let r = Reader {
        client,
        server: server.to_string(),
        timeout,
        progress: progress.clone(),
    };
    let mut missing = Vec::new();
    // Without claims or classes the scan goes on: the rows say null where they depend on them.
    let claims = unless_forbidden(
        r.claims().await,
        "list persistentvolumeclaims",
        &mut missing,
    )?;
    let classes = unless_forbidden(r.classes().await, "list storageclasses", &mut missing)?;
    let facts = Facts {
        claims,
        classes,
        census,
    };
    let now = wall_clock();
    let mut referenced = Referenced::new();
    let Classified {
        mut findings,
        recheck,
    } = r.volumes(&facts, exclusions, &now, &mut referenced).await?;
    // When tombstones cannot be read, whether an image is an orphan is not known.
    if let Some(c) = facts.census.as_deref() {
        let listed = r.tombstones(c, &mut referenced).await;
        unless_forbidden(listed, "list volumeleftovers", &mut missing)?;
    }
    let unknown_claims = r.recheck(recheck, &facts, &now, &mut findings).await?;
    findings.sort_by(|a, b| a.volume_name.cmp(&b.volume_name));
    Ok(ScanResult {
        findings,
        missing,
        unknown_claims,
        census_failed: Vec::new(),
        referenced,
        cloud_failed: Vec::new(),
        disks: HashMap::new(),
        snapshots: snapshots::SnapshotScan::default(),
        held: Vec::new(),
    })
}

/// A finding that rested on its claim being absent, once a second look could not tell: the
/// claim is unknown (`claim_missing: null`), and the reason says so instead of asserting it gone.
fn claim_unknown(mut f: Finding, failed: &str) -> Finding {
    let status = &mut f.status;
    status.reason = Reason::ClaimUnknown;
    if let Some(c) = status.claim.as_mut() {
        c.missing = Tristate::Unknown;
        c.current_uid = None;
    }
    let claim = status
        .claim
        .as_ref()
        .map_or(String::new(), |c| format!(" {}", c.reference));
    status.message = format!(
        "PersistentVolume {} is {}; whether its claim{claim} still exists is unknown (reading it failed: {failed}).",
        f.volume_name, status.phase
    );
    f
}

/// Findings that say a claim of a Bound or pre-bound volume does not exist.
fn rests_on_absence(f: &Finding) -> bool {
    matches!(
        f.status.reason,
        Reason::BoundClaimMissing | Reason::PreboundClaimMissing
    )
}

#[cfg(test)]
/// Classifies `pvs` against `facts`; findings sorted by PV name. Skipped PVs are logged.
pub(crate) fn findings<'a>(
    pvs: impl IntoIterator<Item = &'a Volume>,
    facts: &Facts,
) -> Vec<Finding> {
    let now = wall_clock();
    let mut out: Vec<Finding> = pvs
        .into_iter()
        .filter_map(|pv| match classify(pv, facts, now.clone()) {
            Verdict::Leftover(f) => Some(*f),
            Verdict::Healthy | Verdict::Undecided(_) | Verdict::Ignored(_) => None,
            Verdict::Skip(why) => {
                tracing::warn!("skipped: {why}");
                None
            }
        })
        .collect();
    out.sort_by(|a, b| a.volume_name.cmp(&b.volume_name));
    out
}

/// One line of the JSON report. The first seven keys are those of the original tool, in its
/// order and with its meaning; the rest follow.
#[derive(Serialize)]
struct Line<'a> {
    name: &'a str,
    phase: &'a str,
    reclaim: &'a str,
    claim: Option<&'a str>,
    claim_missing: Option<bool>,
    storage_class: Option<&'a str>,
    capacity: Option<&'a str>,
    reason: &'static str,
    claim_uid: Option<&'a str>,
    claim_current_uid: Option<&'a str>,
    storage_class_reclaim: Option<&'a str>,
    hints: &'a [Hint],
    phase_since: Option<String>,
    access_modes: &'a [String],
    volume_mode: &'a str,
    source_type: &'a str,
    driver: Option<&'a str>,
    volume_handle: Option<&'a str>,
    pool: Option<&'a str>,
    image_name: Option<&'a str>,
    disk_name: Option<&'a str>,
    path: Option<&'a str>,
    /// The zones the PV's node affinity requires (`status.source.zones`): where an in-tree
    /// disk, and an EBS volume's region, is located.
    zones: &'a [String],
    message: &'a str,
    /// The disk's size as the census listed it (`status.diskSizeBytes`); absent where no census
    /// lists it.
    #[serde(skip_serializing_if = "Option::is_none")]
    disk_size_bytes: Option<i64>,
    /// A stopped expansion (`status.claim.expansion`); absent from every other line.
    #[serde(skip_serializing_if = "Option::is_none")]
    expansion: Option<ExpansionKeys<'a>>,
    /// A cloud disk's keys, after the others; absent from every other line.
    #[serde(flatten)]
    disk: Option<&'a cloud::DiskKeys>,
    /// The estimated cost, with a price table that prices the finding; absent otherwise.
    #[serde(flatten)]
    cost: Option<CostKeys<'a>>,
}

/// The keys of a stopped expansion: `status.claim.expansion`, snake_case as every key of a line.
#[derive(Serialize)]
struct ExpansionKeys<'a> {
    requested: &'a str,
    requested_bytes: i64,
    capacity: &'a str,
    capacity_bytes: i64,
    allocated: Option<&'a str>,
    resize_status: Option<&'a str>,
    stopped_at: &'static str,
    conditions: Vec<ConditionKeys<'a>>,
}

/// One resize condition of a claim.
#[derive(Serialize)]
struct ConditionKeys<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    message: Option<&'a str>,
    last_transition_time: Option<String>,
}

/// The keys of an estimated cost (`status.cost`), amounts in the currency's minor unit.
#[derive(Serialize)]
struct CostKeys<'a> {
    currency: &'a str,
    monthly_cost_minor_units: i64,
    accrued_cost_minor_units: i64,
    cost_since: String,
    priced_by: &'a str,
    /// Which size was priced (`status.cost.sizeBasis`): `DiskSize`, `PvCapacity`, `RestoreSize`.
    cost_size_basis: &'static str,
}

/// The original tool's seven keys of a finding, as it prints them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SevenKeys {
    /// `name`.
    pub name: String,
    /// `phase`.
    pub phase: String,
    /// `reclaim`.
    pub reclaim: String,
    /// `claim`: `namespace/name` when the claimRef has both.
    pub claim: Option<String>,
    /// `claim_missing`: no claim of that name exists; `null` when claims cannot be read.
    pub claim_missing: Option<bool>,
    /// `storage_class`, as written in the PV (`""` stays `""`).
    pub storage_class: Option<String>,
    /// `capacity`.
    pub capacity: Option<String>,
}

#[cfg(test)]
/// The seven keys of a finding.
pub(crate) fn seven_keys(f: &Finding) -> SevenKeys {
    let l = line(f);
    SevenKeys {
        name: l.name.into(),
        phase: l.phase.into(),
        reclaim: l.reclaim.into(),
        claim: l.claim.map(Into::into),
        claim_missing: l.claim_missing,
        storage_class: l.storage_class.map(Into::into),
        capacity: l.capacity.map(Into::into),
    }
}

fn line(f: &Finding) -> Line<'_> {
    let s = &f.status;
    let claim = s.claim.as_ref();
    let class = s.storage_class.as_ref();
    Line {
        // A finding about an image no volume names goes by its VolumeLeftover's name.
        name: f.name(),
        phase: &s.phase,
        reclaim: &s.reclaim_policy,
        // As the original tool: no claim string unless both parts are there, and a PV without
        // a claimRef has no missing claim.
        claim: claim
            .filter(|c| c.namespace.is_some() && c.name.is_some())
            .map(|c| c.reference.as_str()),
        claim_missing: claim.map_or(Some(false), |c| c.missing.known()),
        storage_class: f.storage_class_name.as_deref(),
        capacity: s.capacity.as_deref(),
        reason: s.reason.as_str(),
        claim_uid: claim.and_then(|c| c.uid.as_deref()),
        claim_current_uid: claim.and_then(|c| c.current_uid.as_deref()),
        storage_class_reclaim: class.and_then(|c| c.reclaim_policy.as_deref()),
        hints: &s.hints,
        phase_since: s
            .phase_since
            .as_ref()
            .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        access_modes: &s.access_modes,
        volume_mode: &s.volume_mode,
        source_type: &s.source.kind,
        driver: s.source.driver.as_deref(),
        volume_handle: s.source.volume_handle.as_deref(),
        pool: s.source.pool.as_deref(),
        image_name: s.source.image_name.as_deref(),
        disk_name: s.source.disk_name.as_deref(),
        path: s.source.path.as_deref(),
        zones: &s.source.zones,
        message: &s.message,
        disk_size_bytes: s.disk_size_bytes,
        expansion: claim
            .and_then(|c| c.expansion.as_ref())
            .map(|e| ExpansionKeys {
                requested: &e.requested,
                requested_bytes: e.requested_bytes,
                capacity: &e.capacity,
                capacity_bytes: e.capacity_bytes,
                allocated: e.allocated.as_deref(),
                resize_status: e.resize_status.as_deref(),
                stopped_at: e.stopped_at.as_str(),
                conditions: e
                    .conditions
                    .iter()
                    .map(|c| ConditionKeys {
                        kind: &c.type_,
                        message: c.message.as_deref(),
                        last_transition_time: c
                            .last_transition_time
                            .as_ref()
                            .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
                    })
                    .collect(),
            }),
        disk: None,
        cost: s.cost.as_ref().map(|c| CostKeys {
            currency: &c.currency,
            monthly_cost_minor_units: c.monthly_minor_units,
            accrued_cost_minor_units: c.accrued_minor_units,
            cost_since: c.since.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            priced_by: &c.priced_by,
            cost_size_basis: c.size_basis.as_str(),
        }),
    }
}

/// serde_json formatter with Python's `json.dumps` separators (`", "` and `": "`), so lines
/// compare equal to the original tool's output.
struct PythonStyle;

impl serde_json::ser::Formatter for PythonStyle {
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// Writes one JSON line for a finding.
#[cfg(test)]
pub(crate) fn write_json_line(w: &mut impl Write, f: &Finding) -> std::io::Result<()> {
    write_json_line_with(w, f, None)
}

/// Writes one JSON line for a finding, with a cloud disk's keys when it is about one.
pub(crate) fn write_json_line_with(
    w: &mut impl Write,
    f: &Finding,
    disk: Option<&cloud::DiskKeys>,
) -> std::io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *w, PythonStyle);
    let mut l = line(f);
    l.disk = disk;
    l.serialize(&mut ser).map_err(std::io::Error::other)?;
    w.write_all(b"\n")
}

/// Writes the report.
#[cfg(test)]
pub(crate) fn write_report(
    w: &mut impl Write,
    findings: &[Finding],
    format: Format,
) -> std::io::Result<()> {
    write_report_with(w, findings, &HashMap::new(), format)
}

/// Writes the report; the JSON lines about cloud disks carry their keys from `disks` (by the
/// finding's name).
pub(crate) fn write_report_with(
    w: &mut impl Write,
    findings: &[Finding],
    disks: &HashMap<String, cloud::DiskKeys>,
    format: Format,
) -> std::io::Result<()> {
    match format {
        Format::Jsonl => {
            for f in findings {
                write_json_line_with(w, f, disks.get(f.name()))?;
            }
        }
        // Written whole, with the snapshot findings, by `output::write`.
        Format::Json | Format::Yaml | Format::Name => {}
        Format::Table | Format::Wide => {
            let wide = format == Format::Wide;
            let header = [
                "NAME",
                "REASON",
                "PHASE",
                "RECLAIM",
                "CLAIM",
                "CLAIM-MISSING",
                "CLASS",
                "CAPACITY",
            ];
            // The COST column only when a price table priced something.
            let costed = findings.iter().any(|f| f.status.cost.is_some());
            let mut header = header.to_vec();
            if costed {
                header.push("COST");
            }
            if wide {
                header.extend(["HINTS", "DISK", "MESSAGE"]);
            }
            let rows: Vec<Vec<String>> = findings
                .iter()
                .map(|f| {
                    let l = line(f);
                    let mut row = vec![
                        l.name.to_string(),
                        l.reason.to_string(),
                        l.phase.to_string(),
                        l.reclaim.to_string(),
                        l.claim.unwrap_or("<none>").to_string(),
                        l.claim_missing.map_or("unknown".into(), |b| b.to_string()),
                        l.storage_class
                            .filter(|c| !c.is_empty())
                            .unwrap_or("<none>")
                            .to_string(),
                        l.capacity.unwrap_or("<none>").to_string(),
                    ];
                    if costed {
                        row.push(
                            f.status
                                .cost
                                .as_ref()
                                .map_or("<none>".into(), |c| c.display.clone()),
                        );
                    }
                    if wide {
                        let hints: Vec<&str> = l.hints.iter().map(|h| h.as_str()).collect();
                        row.push(if hints.is_empty() {
                            "<none>".into()
                        } else {
                            hints.join(",")
                        });
                        row.push(where_disk(f));
                        row.push(l.message.to_string());
                    }
                    row
                })
                .collect();
            write_table(w, &header, &rows)?;
        }
    }
    Ok(())
}

/// Where a finding's disk is, in one cell: its CSI handle, else its Ceph pool and image, else
/// its in-tree disk name or path.
fn where_disk(f: &Finding) -> String {
    let s = &f.status.source;
    s.volume_handle
        .clone()
        .or_else(|| match (&s.pool, &s.image_name) {
            (Some(p), Some(i)) => Some(format!("{p}/{i}")),
            _ => None,
        })
        .or_else(|| s.disk_name.clone())
        .or_else(|| s.path.clone())
        .unwrap_or_else(|| "<none>".into())
}

/// Writes `rows` under `header` as kubectl does (Go's tabwriter, which the `tabwriter` crate
/// ports): each column as wide as its widest cell, three spaces between columns. A tab or
/// newline inside a cell would break the columns: they are written as spaces.
pub(crate) fn write_table(
    w: &mut impl Write,
    header: &[&str],
    rows: &[Vec<String>],
) -> std::io::Result<()> {
    let mut tw = tabwriter::TabWriter::new(Vec::new()).padding(3);
    let clean = |c: &str| c.replace(['\t', '\n', '\r'], " ");
    writeln!(tw, "{}", header.join("\t"))?;
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| clean(c)).collect();
        writeln!(tw, "{}", cells.join("\t"))?;
    }
    let table = tw
        .into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // A last column of empty cells leaves padding behind: lines end where their text does.
    for line in String::from_utf8_lossy(&table).lines() {
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

/// How a scan ended, for the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No leftovers (exit 0).
    Clean,
    /// Leftovers found (exit 3).
    Found,
    /// Claims or classes (or one claim looked at again) could not be read, or the backend census
    /// failed: the report is incomplete (exit 4).
    Incomplete,
}

/// What a scan is asked to do beyond classifying every PV.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    /// What is kept out of the report.
    pub exclusions: &'a Exclusions,
    /// The storage backend's census, when asked for.
    pub census: Option<&'a CensusSettings>,
    /// The price table, when given: findings carry their estimated cost.
    pub prices: Option<&'a PriceTable>,
    /// How snapshot objects are read: which are kept out, and the graces of the states the
    /// objects date.
    pub snapshots: &'a snapshots::SnapshotsAsked,
    /// The operator's graces (`--grace`, `--delete-grace`): a finding whose state has not
    /// lasted its grace is held back as the operator holds it.
    pub graces: Graces,
    /// Where the steps are shown while they run (hidden unless stderr is a terminal).
    pub progress: &'a progress::Progress,
}

/// Reads the cluster and writes the report.
///
/// With a census: every pool, GCE zone or region and EBS region is listed twice (a disk missing
/// from both is missing), the PVs are classified against that, and the Ceph images no PV names
/// are listed a third time with their details (owner metadata, age, watchers) before they are
/// reported (a cloud listing has every disk's details already).
pub async fn run(
    client: Client,
    server: &str,
    timeout: Duration,
    asked: Asked<'_>,
    format: Format,
    out: &mut impl Write,
) -> Result<(ScanResult, Outcome), ScanError> {
    let Asked {
        exclusions,
        census,
        prices,
        snapshots: snapshots_asked,
        graces,
        progress,
    } = asked;
    let reader = Reader {
        client: client.clone(),
        server: server.to_string(),
        timeout,
        progress: progress.clone(),
    };
    // The contents before the snapshot listings, and again after them (the snapshot part): a
    // snapshot named by either is named. One deleted between the listings and the second read
    // went with its content (a Delete-policy content goes once its snapshot is deleted), and
    // is named by the first.
    let snapshot_census = census.is_some_and(|cs| {
        cs.config
            .census(cs.image_grace)
            .pools
            .keys()
            .any(Scope::holds_snapshots)
    });
    let handles_before = if snapshot_census {
        reader.content_handles(&snapshots_asked.exclusions).await?
    } else {
        None
    };
    // The disks the PVs name before the listings too: a disk named then is named (see
    // `Reader::volume_disks`).
    let disks_before = match census {
        Some(_) => reader.volume_disks(exclusions).await?,
        None => Vec::new(),
    };
    let state = match census {
        Some(cs) => {
            let scopes = cs.config.census(cs.image_grace).pools.len();
            progress.step(format!(
                "census: each of {scopes} scope(s) listed twice (Ceph pools first, then the clouds)"
            ));
            Some(census_twice(cs).await)
        }
        None => None,
    };
    let mut report = read(
        client,
        server,
        timeout,
        exclusions,
        state
            .as_ref()
            .map(|l| std::sync::Arc::new(l.census.clone())),
        progress,
    )
    .await?;
    let mut census_state = None;
    if let (Some(cs), Some(mut listed)) = (census, state) {
        report.census_failed.append(&mut listed.sizes_unread);
        for r in disks_before {
            note_reference(&listed.census, r, &mut report.referenced);
        }
        let unnamed = unnamed_images(&listed.census, &report.referenced);
        progress.step("census: the details of the Ceph images nothing names");
        let failed = read_details(&mut listed, &unnamed).await;
        report.census_failed.extend(failed);
        // The listers (and the connections they keep) are let go; librados's must be shut down
        // before the process exits.
        listed.listers.clear();
        crate::census::released(cs.deadline).await;
        let c = listed.census;
        report
            .findings
            .extend(orphans(&c, &report.referenced, &wall_clock()));
        report.cloud_failed = listed.failed.into_values().collect();
        census_state = Some(c);
    }
    // After the volumes: a server that cannot be reached, or an identity that may not list PVs,
    // is reported as such, not as a failed snapshot discovery.
    report.snapshots = reader
        .snapshot_part(snapshots_asked, &wall_clock(), &mut report.missing)
        .await?;
    if let Some(c) = &census_state {
        let handles = handles_before.zip(report.snapshots.handles.clone());
        let (found, unknown) = snapshot_orphans(c, handles, &mut report.referenced);
        report.findings.extend(found);
        report.census_failed.extend(unknown);
    }
    let now = wall_clock();
    let (findings, mut held) = hold(std::mem::take(&mut report.findings), graces, &now);
    report.findings = findings;
    held.append(&mut report.snapshots.held);
    held.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    report.held = held;
    report.disks = report
        .findings
        .iter()
        .filter_map(|f| {
            Some((
                f.name().to_string(),
                cloud::disk_keys(f, census_state.as_ref()?)?,
            ))
        })
        .collect();
    if let Some(table) = prices {
        let now = wall_clock();
        for f in &mut report.findings {
            f.status.cost = crate::decide::cost::estimate(&f.status, table, &now);
        }
        for r in &mut report.snapshots.findings {
            r.cost = snapshots::snapshot_cost(&r.finding, table, &now);
        }
    }
    progress.done();
    output::write(out, &report, format, prices, &wall_clock())?;
    out.flush()?;
    let outcome = Outcome::of(&report);
    Ok((report, outcome))
}

/// Holds back the findings whose state has not lasted its grace, by the operator's own rule
/// ([`gate`] with no memory: a state the objects do not date starts its clock at this look).
/// Returns the findings to report, each dated as the operator dates it (`firstSeen`), and those
/// held back.
pub(crate) fn hold(
    findings: Vec<Finding>,
    graces: Graces,
    now: &Time,
) -> (Vec<Finding>, Vec<Held>) {
    let mut reported = Vec::with_capacity(findings.len());
    let mut held = Vec::new();
    for f in findings {
        let (name, reason) = (f.name().to_string(), f.status.reason.as_str());
        match gate(Verdict::Leftover(Box::new(f)), None, &mut None, now, graces) {
            Gated::Now {
                verdict: Verdict::Leftover(mut f),
                first_seen,
            } => {
                f.status.first_seen = first_seen;
                reported.push(*f);
            }
            Gated::Now { .. } => {}
            Gated::Later(left) => held.push(Held {
                kind: "PersistentVolume",
                name,
                reason,
                until: plus(now, left),
            }),
        }
    }
    (reported, held)
}

/// `t + d`, to the second.
pub(crate) fn plus(t: &Time, d: Duration) -> Time {
    let d = jiff::SignedDuration::from_secs(i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Time(t.0.checked_add(d).unwrap_or(t.0))
}

/// The census as `scan` takes it: every backend's listers, what they listed, the scopes whose
/// listing failed (the last failure of each) and the pools where sizes could not be read.
struct Listed {
    census: Census,
    listers: Vec<Box<dyn Lister>>,
    failed: cloud::Failures,
    sizes_unread: Vec<CensusGap>,
}

/// The census, taken twice before anything is classified: a disk counts as missing only when
/// two listings lack it (see [`Census::image`]); after one, every absence is unknown. Every
/// backend's listers alike (the operator's, [`crate::census::listers`]); the first listing reads
/// names, the second every disk's size (what the volumes' capacities are compared with). A
/// scope that failed either time is reported (one listing is not two), and so are the pools
/// where some sizes could not be read: whether those disks' sizes differ from their volumes'
/// is not known.
async fn census_twice(cs: &CensusSettings) -> Listed {
    let mut listed = Listed {
        census: cs.config.census(cs.image_grace),
        listers: crate::census::listers(cs),
        failed: cloud::Failures::new(),
        sizes_unread: Vec::new(),
    };
    let unbuilt = crate::census::unbuilt(cs, &listed.listers);
    cloud::record(&mut listed.census, unbuilt, &mut listed.failed);
    for reading in [Reading::Names, Reading::Sizes] {
        for lister in &mut listed.listers {
            let reports = lister.list(reading).await;
            if matches!(reading, Reading::Sizes) {
                for r in &reports {
                    if let Ok(snap) = &r.result
                        && let Some((image, e)) = snap.unread.iter().next()
                    {
                        listed.sizes_unread.push(CensusGap {
                            scope: r.key.to_string(),
                            line: format!(
                                "the Ceph census of pool {}: the sizes of {} image(s) could not be read (first: {image}: {e}); whether they differ from their volumes' capacities is not known",
                                r.key,
                                snap.unread.len()
                            ),
                        });
                    }
                }
            }
            cloud::record(&mut listed.census, reports, &mut listed.failed);
        }
    }
    listed
}

/// The images of each listed pool that nothing names: the only ones whose details (owner
/// metadata, age, watchers) are worth a third listing.
fn unnamed_images(c: &Census, referenced: &Referenced) -> Referenced {
    c.pools
        .iter()
        // A cloud listing has every disk's details: only Ceph pools are listed a third time.
        .filter(|(k, _)| k.backend().lists_details_apart())
        .filter_map(|(k, st)| {
            let cur = st.current.as_ref()?;
            let refs = referenced.get(k);
            Some((
                k.clone(),
                cur.images
                    .keys()
                    .filter(|n| refs.is_none_or(|r| !r.contains(*n)))
                    .cloned()
                    .collect(),
            ))
        })
        .collect()
}

/// Lists a third time the backends that read details apart (Ceph), with the details of the
/// images in `unnamed`; a failure is recorded as the listings' are. Returns the pools where some
/// of those details could not be read, one line each.
async fn read_details(listed: &mut Listed, unnamed: &Referenced) -> Vec<CensusGap> {
    let mut gaps = Vec::new();
    for lister in &mut listed.listers {
        if !lister.reads_details_apart() {
            continue;
        }
        let reports = lister.list(Reading::Details(unnamed)).await;
        for r in &reports {
            // Images nothing names whose details could not be read: whether they are anyone's
            // is not known, so the census is not complete. (A named image's size read here,
            // or not, changes nothing: the volumes were classified on the listing before.)
            let Ok(snap) = &r.result else { continue };
            let asked = unnamed.get(&r.key);
            let unread: Vec<_> = snap
                .unread
                .iter()
                .filter(|(image, _)| asked.is_some_and(|a| a.contains(*image)))
                .collect();
            if let Some((image, e)) = unread.first() {
                gaps.push(CensusGap {
                    scope: r.key.to_string(),
                    line: format!(
                        "the Ceph census of pool {}: the details of {} image(s) nothing names could not be read (first: {image}: {e}); whether they are leftovers is not known",
                        r.key,
                        unread.len()
                    ),
                });
            }
        }
        cloud::record(&mut listed.census, reports, &mut listed.failed);
    }
    gaps
}

/// The findings about the snapshots no content names, every snapshot scope's, from the
/// contents' handles read before and after the listings (`None`: either read failed, or the
/// snapshot kinds are not served); with no handles, a line per scope saying nothing is known.
pub(crate) fn snapshot_orphans(
    c: &Census,
    handles: Option<(Vec<String>, Vec<String>)>,
    referenced: &mut Referenced,
) -> (Vec<Finding>, Vec<CensusGap>) {
    let scopes: Vec<&Scope> = c.pools.keys().filter(|k| k.holds_snapshots()).collect();
    let Some((before, after)) = handles else {
        let unknown = scopes
            .into_iter()
            .filter(|k| c.is_trusted(k))
            .map(|k| CensusGap {
                scope: k.to_string(),
                line: format!("the snapshot census of {k}: the VolumeSnapshotContents could not be read (not served, or forbidden); nothing is said about its snapshots"),
            })
            .collect();
        return (Vec::new(), unknown);
    };
    note_snapshots(c, before.into_iter().chain(after), referenced);
    let now = wall_clock();
    let empty = HashSet::new();
    let found = scopes
        .into_iter()
        .flat_map(|k| c.orphans(k, referenced.get(k).unwrap_or(&empty), &now))
        .collect();
    (found, Vec::new())
}

/// The findings about the images nothing names at `now`, every pool's (not the snapshot
/// scopes': see [`snapshot_orphans`]).
pub(crate) fn orphans(c: &Census, referenced: &Referenced, now: &Time) -> Vec<Finding> {
    let empty = HashSet::new();
    let mut found = Vec::new();
    for k in c.pools.keys().filter(|k| !k.holds_snapshots()) {
        let refs = referenced.get(k).unwrap_or(&empty);
        found.extend(c.orphans(k, refs, now));
    }
    found
}

impl Outcome {
    /// An incomplete report says so before it says anything was found: its silence about a
    /// volume or an image proves nothing.
    pub(crate) fn of(report: &ScanResult) -> Outcome {
        if !report.missing.is_empty()
            || !report.unknown_claims.is_empty()
            || !report.census_failed.is_empty()
            || !report.cloud_failed.is_empty()
            || !report.snapshots.unknown.is_empty()
        {
            Outcome::Incomplete
        } else if report.findings.is_empty() && report.snapshots.findings.is_empty() {
            Outcome::Clean
        } else {
            Outcome::Found
        }
    }
}
