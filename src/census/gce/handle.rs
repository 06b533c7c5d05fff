//! How the GCE PD CSI driver and the in-tree `gcePersistentDisk` source name a disk, and GCE's
//! zones and regions. Pure; never panics on any input.

/// What the project of a migrated in-tree disk's handle says when the PV did not name one
/// (csi-translation-lib's `UnspecifiedValue`).
const UNSPECIFIED: &str = "UNSPECIFIED";

/// A GCE PD CSI volume handle: `projects/P/zones/Z/disks/D` (a zonal disk) or
/// `projects/P/regions/R/disks/D` (a regional one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GceHandle {
    /// The project (`None` for `UNSPECIFIED`, which csi-translation-lib writes for migrated
    /// in-tree volumes).
    pub(crate) project: Option<String>,
    /// The zone or the region.
    pub(crate) location: String,
    /// Whether `location` is a region (the disk is a regional PD).
    pub(crate) regional: bool,
    /// The disk's name.
    pub(crate) name: String,
}

/// Parses a GCE PD CSI volume handle; `None` for anything else (never panics).
pub(crate) fn parse_gce_handle(handle: &str) -> Option<GceHandle> {
    let parts: Vec<&str> = handle.split('/').collect();
    let ["projects", project, kind, location, "disks", name] = parts[..] else {
        return None;
    };
    let regional = match kind {
        "zones" => false,
        "regions" => true,
        _ => return None,
    };
    if [project, location, name].iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(GceHandle {
        project: (project != UNSPECIFIED).then(|| project.to_string()),
        location: location.to_string(),
        regional,
        name: name.to_string(),
    })
}

/// Where an in-tree GCE disk is, from the zones its PV's node affinity lists (or a label
/// value with `__` between zones): one zone is a zonal disk's; two or more zones of one region
/// are a regional disk's, and its location is that region (csi-translation-lib's
/// `getRegionFromZones`: a zone is `{locale}-{region}-{zone}`). Anything else: `None`.
pub(crate) fn gce_location(zones: &[&str]) -> Option<String> {
    let mut all: Vec<&str> = zones
        .iter()
        .flat_map(|z| z.split("__"))
        .filter(|z| !z.is_empty())
        .collect();
    all.sort_unstable();
    all.dedup();
    match all[..] {
        [] => None,
        [one] => Some(one.to_string()),
        _ => {
            let mut regions = all.iter().map(|z| gce_region_of(z));
            let first = regions.next()??;
            regions
                .all(|r| r.as_deref() == Some(first.as_str()))
                .then_some(first)
        }
    }
}

/// A GCE location: a zone or a region (as the census configuration and the scopes name them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GceLocation {
    /// `{locale}-{region}-{zone}`: `europe-west1-b`.
    Zone(String),
    /// `{locale}-{region}`: `europe-west1`.
    Region(String),
}

impl GceLocation {
    /// Tells a zone from a region by its shape; `None` for anything else.
    pub(crate) fn parse(s: &str) -> Option<GceLocation> {
        let parts: Vec<&str> = s.split('-').collect();
        if parts.iter().any(|p| {
            p.is_empty()
                || !p
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        }) {
            return None;
        }
        match parts.len() {
            2 => Some(GceLocation::Region(s.into())),
            3 => Some(GceLocation::Zone(s.into())),
            _ => None,
        }
    }

    /// Its name.
    pub(crate) fn name(&self) -> &str {
        match self {
            GceLocation::Zone(n) | GceLocation::Region(n) => n,
        }
    }

    /// Its zone (a zone's own name) and its region (a zone's region, or the region itself).
    pub(crate) fn zone_and_region(&self) -> (Option<String>, Option<String>) {
        match self {
            GceLocation::Zone(z) => (Some(z.clone()), gce_region_of(z)),
            GceLocation::Region(r) => (None, Some(r.clone())),
        }
    }
}

/// The region of a GCE zone `{locale}-{region}-{zone}` (`us-central1-a` → `us-central1`).
fn gce_region_of(zone: &str) -> Option<String> {
    let parts: Vec<&str> = zone.split('-').collect();
    match parts[..] {
        [locale, region, z] if ![locale, region, z].contains(&"") => {
            Some(format!("{locale}-{region}"))
        }
        _ => None,
    }
}
