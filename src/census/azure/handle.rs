//! How the Azure Disk CSI driver and the in-tree `azureDisk` source name a disk: by its resource
//! id. Pure; never panics on any input.

/// The subscription, resource group and name of an Azure resource id of `kind` (`disks`,
/// `snapshots`): `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/<kind>/NAME`,
/// every part compared and returned lower-cased (Azure treats resource ids case-insensitively,
/// and the Azure Disk CSI driver writes them as ARM returned them, often in another case than
/// the portal's). `None` for anything else (never panics).
pub(crate) fn parse_azure_id(id: &str, kind: &str) -> Option<(String, String, String)> {
    let lower = id.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('/').collect();
    let [
        "",
        "subscriptions",
        sub,
        "resourcegroups",
        rg,
        "providers",
        "microsoft.compute",
        k,
        name,
    ] = parts[..]
    else {
        return None;
    };
    if k != kind || [sub, rg, name].iter().any(|p| p.is_empty()) {
        return None;
    }
    Some((sub.to_string(), rg.to_string(), name.to_string()))
}
