//! `[[faults]]`: the fault schedule. Each entry names what it needs for its
//! kind and nothing else; entries are in non-decreasing `at_s` order and
//! happen before the run ends (duration plus drain). Node names are checked
//! later, against the built topology ([`crate::Experiment::check_node_names`]).

use crate::error::ConfigError;
use crate::locate::index;
use crate::model::{Fault, FaultKind, PartitionTarget, Run};
use crate::raw::{RawFault, RawFaultKind};
use crate::resolve::Ctx;
use meridian_core::LatencyMatrix;

pub fn resolve(ctx: Ctx<'_>, raw: &[RawFault], run: &Run, matrix: &LatencyMatrix) -> Result<Vec<Fault>, ConfigError> {
    let end_s = run.duration_s + run.drain_s;
    let mut faults: Vec<Fault> = Vec::with_capacity(raw.len());
    for (i, f) in raw.iter().enumerate() {
        let path = index("faults", i);
        let field = |name: &str| format!("{path}.{name}");
        let at_s = ctx.non_negative(&field("at_s"), f.at_s)?;
        if let Some(prev) = faults.last().filter(|p| p.at_s > at_s) {
            return Err(ctx.err(
                &field("at_s"),
                format!(
                    "faults must be in time order: at_s {at_s} comes after a fault at {} (line {})",
                    prev.at_s, prev.line
                ),
            ));
        }
        if at_s > end_s {
            return Err(
                ctx.err(&field("at_s"), format!("{at_s} s is after the run ends ({end_s} s = duration_s + drain_s)"))
            );
        }
        faults.push(Fault { at_s, kind: kind(ctx, &path, f, matrix)?, line: ctx.loc.line_of(&path).unwrap_or(0) });
    }
    Ok(faults)
}

/// The fields each kind takes, for error messages.
fn takes(kind: RawFaultKind) -> &'static str {
    match kind {
        RawFaultKind::Crash => "crash takes node",
        RawFaultKind::Restart => "restart takes node",
        RawFaultKind::Partition => "partition takes regions, nodes, links or one_way",
        RawFaultKind::Heal => "heal takes no target",
        RawFaultKind::ClockJump => "clock-jump takes node and by_ms",
    }
}

fn kind(ctx: Ctx<'_>, path: &str, f: &RawFault, matrix: &LatencyMatrix) -> Result<FaultKind, ConfigError> {
    let field = |name: &str| format!("{path}.{name}");
    let allowed: &[&str] = match f.kind {
        RawFaultKind::Crash | RawFaultKind::Restart => &["node"],
        RawFaultKind::Partition => &["regions", "nodes", "links", "one_way"],
        RawFaultKind::Heal => &[],
        RawFaultKind::ClockJump => &["node", "by_ms"],
    };
    let given = [
        ("node", f.node.is_some()),
        ("regions", f.regions.is_some()),
        ("nodes", f.nodes.is_some()),
        ("links", f.links.is_some()),
        ("one_way", f.one_way.is_some()),
        ("by_ms", f.by_ms.is_some()),
    ];
    if let Some((name, _)) = given.iter().find(|(name, present)| *present && !allowed.contains(name)) {
        return Err(ctx.err(&field(name), format!("not used by this fault ({})", takes(f.kind))));
    }
    let node = || f.node.clone().ok_or_else(|| ctx.err(&field("node"), format!("required ({})", takes(f.kind))));
    Ok(match f.kind {
        RawFaultKind::Crash => FaultKind::Crash { node: node()? },
        RawFaultKind::Restart => FaultKind::Restart { node: node()? },
        RawFaultKind::Heal => FaultKind::Heal,
        RawFaultKind::ClockJump => {
            let by_ms =
                f.by_ms.ok_or_else(|| ctx.err(&field("by_ms"), "required (milliseconds, negative jumps back)"))?;
            FaultKind::ClockJump { node: node()?, by_ms: ctx.finite(&field("by_ms"), by_ms)? }
        }
        RawFaultKind::Partition => FaultKind::Partition(partition(ctx, path, f, matrix)?),
    })
}

fn partition(ctx: Ctx<'_>, path: &str, f: &RawFault, matrix: &LatencyMatrix) -> Result<PartitionTarget, ConfigError> {
    let given = [
        ("regions", f.regions.is_some()),
        ("nodes", f.nodes.is_some()),
        ("links", f.links.is_some()),
        ("one_way", f.one_way.is_some()),
    ];
    let mut named = given.iter().filter(|(_, present)| *present).map(|(name, _)| *name);
    let (first, second) = (named.next(), named.next());
    if let (Some(first), Some(second)) = (first, second) {
        return Err(ctx.err(
            &format!("{path}.{second}"),
            format!("give one of regions, nodes, links or one_way, not {first} and {second}"),
        ));
    }
    if let Some(regions) = &f.regions {
        ctx.regions(&format!("{path}.regions"), regions, matrix)?;
        return Ok(PartitionTarget::Regions(regions.clone()));
    }
    if let Some(nodes) = &f.nodes {
        if nodes.is_empty() {
            return Err(ctx.err(&format!("{path}.nodes"), "must name at least one node"));
        }
        return Ok(PartitionTarget::Nodes(nodes.clone()));
    }
    if let Some(links) = &f.links {
        return link_pairs(ctx, &format!("{path}.links"), links).map(PartitionTarget::Links);
    }
    if let Some(links) = &f.one_way {
        return link_pairs(ctx, &format!("{path}.one_way"), links).map(PartitionTarget::OneWay);
    }
    Err(ctx.err(
        &format!("{path}.regions"),
        "a partition needs regions = [...], nodes = [...], links = [[a, b], ...] or one_way = [[from, to], ...]",
    ))
}

/// `links` or `one_way = [["a", "b"], ...]`: pairs of two different nodes,
/// at least one.
fn link_pairs(ctx: Ctx<'_>, field: &str, links: &[Vec<String>]) -> Result<Vec<(String, String)>, ConfigError> {
    if links.is_empty() {
        return Err(ctx.err(field, "must name at least one link"));
    }
    let mut pairs = Vec::with_capacity(links.len());
    for (i, link) in links.iter().enumerate() {
        match link.as_slice() {
            [a, b] if a != b => pairs.push((a.clone(), b.clone())),
            [a, _] => return Err(ctx.err(field, format!("link {i} joins {a} to itself"))),
            _ => {
                return Err(ctx.err(field, format!("link {i} is {link:?}; a link is a pair of nodes [\"a\", \"b\"]")));
            }
        }
    }
    Ok(pairs)
}
