//! The price table (`--price-table`): what a GiB-month of a volume, a disk or a snapshot costs,
//! by StorageClass name or by CSI driver and disk type, in one currency. Parsing, checking and
//! lookup only. Pure: no file is read here, no clock.
//!
//! Prices are decimals written as strings (`"0.17"`) and kept as exact integers of
//! [`NANOS_PER_UNIT`]ths of the currency's unit, so that every estimate made from them is an
//! exact rational rounded once, and the same table gives the same numbers on every machine.
//!
//! ```yaml
//! currency: USD          # ISO 4217 code, written into every estimate
//! decimals: 2            # digits of the minor unit (default 2; JPY: 0)
//! note: "GCE us-central1 list prices, 2026-11 (an example)"
//! volumes:               # volumes and disks
//!   - storageClass: premium-rwo            # by StorageClass name: first
//!     perGiBMonth: "0.17"
//!   - driver: pd.csi.storage.gke.io        # by driver, type and regional-ness
//!     type: pd-balanced
//!     regional: true
//!     perGiBMonth: "0.20"
//!   - driver: pd.csi.storage.gke.io        # by driver alone: any type
//!     perGiBMonth: "0.10"
//! snapshots:
//!   - driver: pd.csi.storage.gke.io
//!     perGiBMonth: "0.05"
//! ```

use serde::Deserialize;

/// A price's unit: a billionth of the currency's unit.
pub const NANOS_PER_UNIT: u64 = 1_000_000_000;

/// The most digits a minor unit may have (a price's exactness is nine).
const MAX_DECIMALS: u8 = 4;

/// The most a GiB-month may cost (in units): more is surely a typo, and keeps the arithmetic of
/// the estimates far from overflowing.
const MAX_PRICE_UNITS: u64 = 1_000_000;

/// The price table, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriceTable {
    /// The currency's ISO 4217 code.
    pub currency: String,
    /// Digits of the minor unit (2: cents).
    pub decimals: u8,
    /// Where the prices come from, as the table says (shown in the docs' examples, logged).
    pub note: Option<String>,
    /// Prices of volumes and disks.
    volumes: Vec<Price>,
    /// Prices of snapshots.
    snapshots: Vec<Price>,
}

/// One row: what it matches and what a GiB-month costs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Price {
    matches: Match,
    nanos_per_gib_month: u64,
}

/// What a row matches. A StorageClass name wins over a driver row; among driver rows, the one
/// that names more (type, then regional-ness) wins. Two rows that match the same things are
/// refused when the table is read, so the winner is always one row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Match {
    /// The volumes of this StorageClass.
    Class(String),
    /// The disks this CSI driver makes, of this type (`None`: any) and regional-ness (`None`:
    /// either).
    Driver {
        driver: String,
        disk_type: Option<String>,
        regional: Option<bool>,
    },
}

/// What a finding says that a price may be looked up by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PriceKey<'a> {
    /// The StorageClass of the volume.
    pub storage_class: Option<&'a str>,
    /// The CSI driver that makes such disks (for an in-tree volume, the driver it migrates to).
    pub driver: Option<&'a str>,
    /// The disk type (`pd-balanced`, `gp3`).
    pub disk_type: Option<&'a str>,
    /// Whether the disk is regional (replicated in two zones).
    pub regional: bool,
}

/// What is priced: volumes and disks, or snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priced {
    /// A volume or disk.
    Volume,
    /// A snapshot.
    Snapshot,
}

/// The price that applies, and the row it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Billionths of the currency's unit per GiB-month.
    pub nanos_per_gib_month: u64,
    /// Which row: `storageClass premium-rwo`, `driver pd.csi.storage.gke.io type pd-ssd regional`.
    pub row: String,
}

/// The table as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Written {
    currency: String,
    #[serde(default)]
    decimals: Option<u8>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    volumes: Vec<WrittenPrice>,
    #[serde(default)]
    snapshots: Vec<WrittenPrice>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WrittenPrice {
    #[serde(default)]
    storage_class: Option<String>,
    #[serde(default)]
    driver: Option<String>,
    #[serde(default, rename = "type")]
    disk_type: Option<String>,
    #[serde(default)]
    regional: Option<bool>,
    #[serde(rename = "perGiBMonth")]
    per_gib_month: Decimal,
}

/// A price as written: a string (exact), or a YAML number, which is read as the shortest text
/// that gives the same number back (`0.17` stays `0.17`).
#[derive(Deserialize)]
#[serde(untagged)]
enum Decimal {
    Text(String),
    Number(f64),
}

impl Decimal {
    fn text(&self) -> String {
        match self {
            Decimal::Text(t) => t.clone(),
            Decimal::Number(n) => n.to_string(),
        }
    }
}

impl PriceTable {
    /// Reads and checks a table (YAML or JSON).
    pub fn parse(text: &str) -> Result<PriceTable, String> {
        let w: Written = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let currency = w.currency.trim().to_string();
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(format!(
                "currency {:?} is not an ISO 4217 code (three capital letters, like USD or EUR)",
                w.currency
            ));
        }
        let decimals = w.decimals.unwrap_or(2);
        if decimals > MAX_DECIMALS {
            return Err(format!(
                "decimals {decimals}: a minor unit has at most {MAX_DECIMALS} digits"
            ));
        }
        let volumes = rows(w.volumes, "volumes")?;
        let snapshots = rows(w.snapshots, "snapshots")?;
        if volumes.is_empty() && snapshots.is_empty() {
            return Err("the table has no prices (volumes: or snapshots:)".into());
        }
        Ok(PriceTable {
            currency,
            decimals,
            note: w.note.filter(|n| !n.trim().is_empty()),
            volumes,
            snapshots,
        })
    }

    /// The price of what `key` describes, if a row applies.
    pub fn price(&self, what: Priced, key: &PriceKey<'_>) -> Option<Applied> {
        let rows = match what {
            Priced::Volume => &self.volumes,
            Priced::Snapshot => &self.snapshots,
        };
        let by_class = key.storage_class.and_then(|c| {
            rows.iter()
                .find(|p| matches!(&p.matches, Match::Class(name) if name == c))
        });
        let by_driver = || {
            rows.iter()
                .filter_map(|p| match &p.matches {
                    Match::Driver {
                        driver,
                        disk_type,
                        regional,
                    } if key.driver == Some(driver.as_str())
                        && disk_type.as_deref().is_none_or(|t| {
                            key.disk_type.is_some_and(|k| k.eq_ignore_ascii_case(t))
                        })
                        && regional.is_none_or(|r| r == key.regional) =>
                    {
                        // More named, more specific.
                        Some(((disk_type.is_some(), regional.is_some()), p))
                    }
                    _ => None,
                })
                .max_by_key(|(specific, _)| *specific)
                .map(|(_, p)| p)
        };
        let p = by_class.or_else(by_driver)?;
        Some(Applied {
            nanos_per_gib_month: p.nanos_per_gib_month,
            row: p.matches.to_string(),
        })
    }
}

impl std::fmt::Display for Match {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Match::Class(c) => write!(f, "storageClass {c}"),
            Match::Driver {
                driver,
                disk_type,
                regional,
            } => {
                write!(f, "driver {driver}")?;
                if let Some(t) = disk_type {
                    write!(f, " type {t}")?;
                }
                match regional {
                    Some(true) => write!(f, " regional"),
                    Some(false) => write!(f, " zonal"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Checks the rows of one list: each names a class or a driver (not both), has a price, and no
/// two match the same things.
fn rows(written: Vec<WrittenPrice>, list: &str) -> Result<Vec<Price>, String> {
    let mut out: Vec<Price> = Vec::with_capacity(written.len());
    for (i, w) in written.into_iter().enumerate() {
        let at = || format!("{list}[{i}]");
        let nonempty =
            |s: Option<String>| s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        let matches = match (nonempty(w.storage_class), nonempty(w.driver)) {
            (Some(c), None) if w.disk_type.is_none() && w.regional.is_none() => Match::Class(c),
            (Some(_), None) => {
                return Err(format!(
                    "{}: a storageClass row is the class's price; type and regional belong to driver rows",
                    at()
                ));
            }
            (None, Some(driver)) => Match::Driver {
                driver,
                disk_type: nonempty(w.disk_type),
                regional: w.regional,
            },
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{}: names both storageClass and driver; one row prices one of them",
                    at()
                ));
            }
            (None, None) => return Err(format!("{}: names neither storageClass nor driver", at())),
        };
        let written = w.per_gib_month.text();
        let nanos_per_gib_month =
            parse_price(&written).map_err(|e| format!("{}: perGiBMonth {written:?}: {e}", at()))?;
        if let Some(same) = out.iter().position(|p| same_match(&p.matches, &matches)) {
            return Err(format!(
                "{}: matches the same volumes as {list}[{same}] ({matches})",
                at()
            ));
        }
        out.push(Price {
            matches,
            nanos_per_gib_month,
        });
    }
    Ok(out)
}

/// Whether two rows match the same things (types compare without case, as the drivers read them).
fn same_match(a: &Match, b: &Match) -> bool {
    match (a, b) {
        (Match::Class(x), Match::Class(y)) => x == y,
        (
            Match::Driver {
                driver: d1,
                disk_type: t1,
                regional: r1,
            },
            Match::Driver {
                driver: d2,
                disk_type: t2,
                regional: r2,
            },
        ) => {
            d1 == d2
                && r1 == r2
                && match (t1, t2) {
                    (Some(x), Some(y)) => x.eq_ignore_ascii_case(y),
                    (None, None) => true,
                    _ => false,
                }
        }
        _ => false,
    }
}

/// A non-negative decimal (`"0.17"`, `"12"`, `"0.0000035"`) in billionths of a unit, exactly.
fn parse_price(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(fraction.is_empty() || digits(fraction)) {
        return Err("not a decimal number (write it as a string: \"0.17\")".into());
    }
    if fraction.len() > 9 {
        return Err("more than nine decimal places".into());
    }
    let whole: u64 = whole.parse().map_err(|_| "too large".to_string())?;
    if whole >= MAX_PRICE_UNITS {
        return Err(format!(
            "at least {MAX_PRICE_UNITS} a GiB-month: surely a typo"
        ));
    }
    let fraction: u64 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<9}")
            .parse()
            .map_err(|_| "not a decimal".to_string())?
    };
    Ok(whole * NANOS_PER_UNIT + fraction)
}
