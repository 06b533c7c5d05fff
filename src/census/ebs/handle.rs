//! How the EBS CSI driver and the in-tree `awsElasticBlockStore` source name a volume, and AWS's
//! zones and regions. Pure; never panics on any input.

/// An EBS volume id (`vol-` and hex digits: `vol-12345678` or `vol-0123456789abcdef0`).
pub(crate) fn is_ebs_volume_id(id: &str) -> bool {
    id.strip_prefix("vol-")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// The volume id and zone of an in-tree `awsElasticBlockStore.volumeID`: `aws://ZONE/vol-…`,
/// `aws:///vol-…` or a bare `vol-…` (csi-translation-lib's `KubernetesVolumeIDToEBSVolumeID`).
pub(crate) fn parse_ebs_volume_id(id: &str) -> Option<(String, Option<String>)> {
    let (zone, vol) = match id.strip_prefix("aws://") {
        Some(rest) => {
            let (zone, vol) = rest.split_once('/')?;
            (Some(zone).filter(|z| !z.is_empty()), vol.trim_matches('/'))
        }
        None => (None, id),
    };
    is_ebs_volume_id(vol).then(|| (vol.to_string(), zone.map(str::to_string)))
}

/// The region of an AWS availability zone: the zone up to its first numeric part, without the
/// zone letter (`us-east-1a` → `us-east-1`, `us-gov-west-1b` → `us-gov-west-1`, a Local Zone
/// `us-west-2-lax-1a` → `us-west-2`). `None` for what is not shaped like a zone.
pub(crate) fn aws_region_of(zone: &str) -> Option<String> {
    let parts: Vec<&str> = zone.split('-').collect();
    let at = parts
        .iter()
        .position(|p| p.starts_with(|c: char| c.is_ascii_digit()))?;
    if at < 2 || parts[..at].iter().any(|p| p.is_empty()) {
        return None;
    }
    let num = parts[at];
    let digits = num.trim_end_matches(|c: char| c.is_ascii_lowercase());
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || num.len() - digits.len() > 1
    {
        return None;
    }
    // A region's own name has no zone letter: `us-east-1` is a region, not a zone.
    if at + 1 == parts.len() && num.len() == digits.len() {
        return None;
    }
    Some(format!("{}-{digits}", parts[..at].join("-")))
}
