//! The latency matrix of an experiment: a named preset (DESIGN.md), or an
//! explicit `[network] rtt_ms = { "a-b" = ms, ... }` whose region names
//! come from the pairs.
//!
//! Region names may contain `-` themselves (`south-carolina`), so a pair
//! key is split at the `-` that leaves known names (server and client
//! regions) on both sides, or one side, or the only `-` there is; `"a/b"`
//! is accepted as an unambiguous spelling too.

use crate::error::ConfigError;
use crate::locate::join;
use crate::raw::{RawClients, RawCluster, RawNetwork};
use crate::resolve::Ctx;
use meridian_core::LatencyMatrix;
use meridian_core::latency::PRESETS;
use std::collections::BTreeMap;

/// Intra-region round trip of an explicit matrix when not given.
pub const DEFAULT_LOCAL_RTT_MS: f64 = 0.2;

pub fn build(
    ctx: Ctx<'_>,
    cluster: &RawCluster,
    clients: &RawClients,
    network: &RawNetwork,
) -> Result<LatencyMatrix, ConfigError> {
    let local = match network.local_rtt_ms {
        Some(ms) => Some(ctx.non_negative("network.local_rtt_ms", ms)?),
        None => None,
    };
    match (&cluster.preset, &network.rtt_ms) {
        (Some(_), Some(_)) => Err(ctx.err("network.rtt_ms", "give either cluster.preset or network.rtt_ms, not both")),
        (Some(name), None) => preset(ctx, name, local),
        (None, Some(pairs)) => {
            let mut known = cluster.server_regions.clone();
            known.extend(clients.regions.iter().flatten().cloned());
            explicit(ctx, pairs, &known, local.unwrap_or(DEFAULT_LOCAL_RTT_MS))
        }
        (None, None) => Err(ctx.err(
            "cluster.preset",
            format!("missing: name a latency preset (one of {}) or give [network] rtt_ms", PRESETS.join(", ")),
        )),
    }
}

fn preset(ctx: Ctx<'_>, name: &str, local: Option<f64>) -> Result<LatencyMatrix, ConfigError> {
    let Some(mut m) = LatencyMatrix::preset(name) else {
        return Err(ctx.err("cluster.preset", format!("unknown preset `{name}` (presets: {})", PRESETS.join(", "))));
    };
    if let Some(ms) = local {
        for (i, row) in m.rtt_ms.iter_mut().enumerate() {
            row[i] = ms;
        }
    }
    Ok(m)
}

fn explicit(
    ctx: Ctx<'_>,
    pairs: &BTreeMap<String, f64>,
    known: &[String],
    local: f64,
) -> Result<LatencyMatrix, ConfigError> {
    let mut regions: Vec<String> = Vec::new();
    let mut split = Vec::with_capacity(pairs.len());
    for (key, ms) in pairs {
        let field = join("network.rtt_ms", key);
        let (a, b) = split_pair(key, known).map_err(|m| ctx.err(&field, m))?;
        ctx.non_negative(&field, *ms)?;
        for name in [&a, &b] {
            if !regions.contains(name) {
                regions.push(name.clone());
            }
        }
        split.push((a, b, *ms));
    }
    if regions.is_empty() {
        return Err(ctx.err("network.rtt_ms", "names no region pairs"));
    }
    // Server and client regions first, in the file's order, then the rest.
    regions.sort_by_key(|r| known.iter().position(|k| k == r).unwrap_or(usize::MAX));
    let names: Vec<&str> = regions.iter().map(String::as_str).collect();
    let pairs: Vec<(&str, &str, f64)> = split.iter().map(|(a, b, ms)| (a.as_str(), b.as_str(), *ms)).collect();
    LatencyMatrix::from_pairs(&names, &pairs, local).map_err(|m| ctx.err("network.rtt_ms", m))
}

/// Splits `"a-b"` (or `"a/b"`) into its two region names.
pub fn split_pair(key: &str, known: &[String]) -> Result<(String, String), String> {
    if let Some((a, b)) = key.split_once('/') {
        return nonempty(a.trim(), b.trim(), key);
    }
    let candidates: Vec<(&str, &str)> = key
        .match_indices('-')
        .map(|(i, _)| (&key[..i], &key[i + 1..]))
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
        .collect();
    let is_known = |s: &str| known.iter().any(|k| k == s);
    let both: Vec<_> = candidates.iter().filter(|(a, b)| is_known(a) && is_known(b)).collect();
    let one: Vec<_> = candidates.iter().filter(|(a, b)| is_known(a) || is_known(b)).collect();
    let pick = match (candidates.len(), both.len(), one.len()) {
        (0, _, _) => return Err(format!("`{key}` is not a pair \"region-region\"")),
        (1, _, _) => candidates[0],
        (_, 1, _) => *both[0],
        (_, 0, 1) => *one[0],
        _ => {
            return Err(format!(
                "cannot tell which `-` separates the two regions in `{key}`: name them in \
                 cluster.server_regions or clients.regions, or write \"a/b\""
            ));
        }
    };
    nonempty(pick.0, pick.1, key)
}

fn nonempty(a: &str, b: &str, key: &str) -> Result<(String, String), String> {
    if a.is_empty() || b.is_empty() {
        Err(format!("`{key}` is not a pair \"region-region\""))
    } else {
        Ok((a.to_string(), b.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hyphenated_region_names_split_on_the_known_boundary() {
        let k = known(&["south-carolina", "hong-kong"]);
        let pair = |s: &str| split_pair(s, &k).map(|(a, b)| format!("{a}|{b}"));
        assert_eq!(pair("south-carolina-hong-kong").unwrap(), "south-carolina|hong-kong");
        assert_eq!(pair("south-carolina-brazil").unwrap(), "south-carolina|brazil");
        assert_eq!(pair("a-b").unwrap(), "a|b");
        assert_eq!(pair("new-york / los-angeles").unwrap(), "new-york|los-angeles");
        assert!(pair("new-york-los-angeles").unwrap_err().contains("a/b"));
        assert!(pair("nohyphen").is_err());
        assert!(pair("-x").is_err());
    }
}
