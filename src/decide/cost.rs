//! What a finding costs: its estimated monthly cost and what it has cost since it became a
//! leftover, from the price table ([`PriceTable`]). Pure: the time is an argument.
//!
//! The arithmetic, exact until one rounding (half up) to the currency's minor unit:
//! - monthly = size in GiB (bytes / 2^30) × the price of a GiB-month;
//! - accrued = monthly × the whole days since it became a leftover × 24 h / [`MONTH`] (730 h,
//!   the month the cloud providers bill by). Counting whole days makes the estimate change once
//!   a day, not on every decision: a finding is rewritten at most daily for its cost.
//!
//! A finding gets an estimate only when its size is known and a row of the table prices it;
//! otherwise it has none — never a guess. A volume whose disk is gone (`VolumeWithoutDisk`)
//! costs nothing.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::model::crd::{CostEstimate, Reason, SizeBasis, VolumeLeftoverStatus};
use crate::model::csi::RBD_CSI_DRIVER;
use crate::model::csi::{AZURE_DISK_CSI_DRIVER, EBS_CSI_DRIVER, GCE_PD_CSI_DRIVER};
use crate::model::price::{Applied, NANOS_PER_UNIT, PriceKey, PriceTable, Priced};

/// The month prices are given for: 730 hours (365 days / 12, as GCE and AWS bill).
pub const MONTH: Duration = Duration::from_secs(730 * 3600);

/// The step of the accrued cost: it counts whole days.
pub const ACCRUAL_STEP: Duration = Duration::from_secs(24 * 3600);

const GIB: u128 = 1 << 30;

/// The estimate for a finding's status at `now`, if the table prices it.
pub fn estimate(s: &VolumeLeftoverStatus, table: &PriceTable, now: &Time) -> Option<CostEstimate> {
    if s.reason == Reason::VolumeWithoutDisk {
        return None;
    }
    // A backend snapshot no content names is priced as the snapshots of its driver, from its
    // creation (when its content went is not known).
    if s.reason.is_snapshot() || s.reason == Reason::SnapshotWithoutContent {
        let snapshot = s.snapshot.as_ref()?;
        let since = snapshot
            .since
            .clone()
            .unwrap_or_else(|| s.first_seen.clone());
        return estimate_snapshot(
            snapshot.restore_size_bytes?,
            s.source.driver.as_deref()?,
            &since,
            table,
            now,
        );
    }
    // What the backend bills: the disk's size where the census listed it, else the PV's
    // capacity (and the estimate says which).
    let disk = s
        .image
        .as_ref()
        .and_then(|i| i.size_bytes)
        .filter(|_| s.reason == Reason::DiskWithoutVolume)
        .or(s.disk_size_bytes);
    let (bytes, basis) = match disk {
        Some(b) => (b, SizeBasis::DiskSize),
        None => (s.capacity_bytes?, SizeBasis::PvCapacity),
    };
    let applied = table.price(Priced::Volume, &price_key(s))?;
    priced(bytes, basis, applied, since(s), table, now)
}

/// The estimate for a snapshot of `bytes` (its restore size) made by the CSI `driver`, a leftover
/// since `since`, if the table's `snapshots` rows price the driver's snapshots.
pub fn estimate_snapshot(
    bytes: i64,
    driver: &str,
    since: &Time,
    table: &PriceTable,
    now: &Time,
) -> Option<CostEstimate> {
    let key = PriceKey {
        storage_class: None,
        driver: Some(driver),
        disk_type: None,
        regional: false,
    };
    let applied = table.price(Priced::Snapshot, &key)?;
    priced(
        bytes,
        SizeBasis::RestoreSize,
        applied,
        since.clone(),
        table,
        now,
    )
}

/// The arithmetic of an estimate (see the module's documentation).
fn priced(
    bytes: i64,
    basis: SizeBasis,
    applied: Applied,
    since: Time,
    table: &PriceTable,
    now: &Time,
) -> Option<CostEstimate> {
    let bytes = u128::try_from(bytes).ok()?;
    let whole_days = whole_steps(&since, now);
    let through = Time(
        since
            .0
            .checked_add(jiff::SignedDuration::from_secs(
                i64::try_from(whole_days.checked_mul(ACCRUAL_STEP.as_secs())?).ok()?,
            ))
            .ok()?,
    );
    // bytes × nanos × 10^decimals / (2^30 × 10^9): the monthly cost in minor units, exactly.
    let minor = 10u128.pow(u32::from(table.decimals));
    let numerator = bytes
        .checked_mul(u128::from(applied.nanos_per_gib_month))?
        .checked_mul(minor)?;
    let denominator = GIB * u128::from(NANOS_PER_UNIT);
    let monthly = rounded(numerator, denominator)?;
    let accrued = rounded(
        numerator.checked_mul(u128::from(whole_days) * u128::from(ACCRUAL_STEP.as_secs()))?,
        denominator.checked_mul(u128::from(MONTH.as_secs()))?,
    )?;
    let money = |v: i64| money(v, table.decimals, &table.currency);
    Some(CostEstimate {
        display: format!(
            "{}/month, {} since {}",
            money(monthly),
            money(accrued),
            since.0.strftime("%Y-%m-%d")
        ),
        currency: table.currency.clone(),
        monthly_minor_units: monthly,
        accrued_minor_units: accrued,
        since,
        accrued_through: through,
        priced_by: applied.row,
        size_basis: basis,
    })
}

/// When the next accrual step of a published estimate comes, from `now`.
pub fn next_step(estimate_through: &Time, now: &Time) -> Option<Duration> {
    let next = estimate_through
        .0
        .checked_add(jiff::SignedDuration::try_from(ACCRUAL_STEP).ok()?)
        .ok()?;
    let left = Duration::try_from(next.duration_since(now.0)).ok()?;
    Some(left)
}

/// What the table may price a finding by.
fn price_key(s: &VolumeLeftoverStatus) -> PriceKey<'_> {
    let class = s.storage_class.as_ref();
    let image = s.image.as_ref();
    let driver = s.source.driver.as_deref().or(match s.source.kind.as_str() {
        // An in-tree volume is priced as the driver it migrates to.
        "gcePersistentDisk" => Some(GCE_PD_CSI_DRIVER),
        "awsElasticBlockStore" => Some(EBS_CSI_DRIVER),
        "azureDisk" => Some(AZURE_DISK_CSI_DRIVER),
        "rbd" => Some(RBD_CSI_DRIVER),
        _ => None,
    });
    let regional = class
        .and_then(|c| c.replication_type.as_deref())
        .is_some_and(|r| r.eq_ignore_ascii_case("regional-pd"))
        || s.source
            .volume_handle
            .as_deref()
            .is_some_and(|h| h.contains("/regions/"))
        || image.is_some_and(|i| !i.replica_zones.is_empty());
    PriceKey {
        storage_class: class.map(|c| c.name.as_str()),
        driver,
        disk_type: image
            .and_then(|i| i.disk_type.as_deref())
            .or(class.and_then(|c| c.disk_type.as_deref())),
        regional,
    }
}

/// When the finding began to cost as a leftover: a tombstone's delete; a disk's last detach,
/// else its creation; a volume's phase transition. Else when it was first seen.
fn since(s: &VolumeLeftoverStatus) -> Time {
    let dated = match s.reason {
        Reason::VolumeDeleted => s.deleted_at.clone(),
        Reason::DiskWithoutVolume => s
            .image
            .as_ref()
            .and_then(|i| i.last_detached.clone().or_else(|| i.created.clone())),
        _ => s.phase_since.clone(),
    };
    dated.unwrap_or_else(|| s.first_seen.clone())
}

/// Whole accrual steps from `since` to `now` (0 when `now` is not after it).
fn whole_steps(since: &Time, now: &Time) -> u64 {
    let secs = now.0.as_second().saturating_sub(since.0.as_second());
    u64::try_from(secs).map_or(0, |s| s / ACCRUAL_STEP.as_secs())
}

/// `n / d` rounded half up, if it fits.
fn rounded(n: u128, d: u128) -> Option<i64> {
    i64::try_from((n.checked_add(d / 2)?) / d).ok()
}

/// `34000` with 2 decimals in USD: `340.00 USD`.
pub fn money(minor: i64, decimals: u8, currency: &str) -> String {
    let scale = 10i64.pow(u32::from(decimals));
    let (whole, part) = (minor / scale, (minor % scale).abs());
    if decimals == 0 {
        format!("{whole} {currency}")
    } else {
        format!(
            "{whole}.{part:0width$} {currency}",
            width = usize::from(decimals)
        )
    }
}
