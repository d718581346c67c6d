//! What Meridian knows about a protocol without running it: its CONTRACT
//! name, promised consistency, summary, parameters, transaction shapes and
//! the services it places. A protocol crate builds its [`ProtocolInfo`]
//! with [`ProtocolInfo::of`]; protocols not written yet have
//! [`ProtocolInfo::planned`] ones. Configuration loaders (experiment files,
//! cluster files) build a protocol's topology through it, so they need no
//! code of any protocol.

use crate::process::{Consistency, Protocol, Shapes};
use crate::{ClusterSpec, CounterDoc, ParamDoc, Params, ServiceSpec, Topology};

/// A protocol Meridian knows by name.
#[derive(Clone, Copy, Debug)]
pub struct ProtocolInfo {
    pub name: &'static str,
    pub consistency: Consistency,
    /// The promise of a deployment with these parameters
    /// (`Protocol::consistency_for`; see [`ProtocolInfo::promise`]).
    pub consistency_for: Option<fn(&Params) -> Consistency>,
    /// Implemented and runnable (otherwise planned).
    pub implemented: bool,
    pub summary: &'static str,
    pub params: &'static [ParamDoc],
    /// The transaction shapes it runs (planned: as its paper describes).
    pub shapes: Shapes,
    /// The services it places, from its parameters (`Protocol::services`).
    pub services: fn(&Params) -> Vec<ServiceSpec>,
    /// The counters it reports (`Protocol::counters`).
    pub counters: fn() -> Vec<CounterDoc>,
}

fn no_services(_: &Params) -> Vec<ServiceSpec> {
    Vec::new()
}

fn no_counters() -> Vec<CounterDoc> {
    Vec::new()
}

impl ProtocolInfo {
    /// The entry of an implemented protocol.
    pub const fn of<P: Protocol>(summary: &'static str, params: &'static [ParamDoc]) -> ProtocolInfo {
        ProtocolInfo {
            name: P::NAME,
            consistency: P::CONSISTENCY,
            consistency_for: Some(P::consistency_for),
            implemented: true,
            summary,
            params,
            shapes: P::SHAPES,
            services: P::services,
            counters: P::counters,
        }
    }

    /// The entry of a protocol not implemented yet.
    pub const fn planned(name: &'static str, consistency: Consistency, summary: &'static str) -> ProtocolInfo {
        let shapes = match consistency {
            // The read-atomic and causal algorithms of the NOC-NOC paper
            // and their baselines run read-only and write-only transactions.
            Consistency::ReadAtomic
            | Consistency::ReadAtomicNoRyw
            | Consistency::Causal
            | Consistency::CausalNoConvergence => Shapes::READ_ONLY_WRITE_ONLY,
            _ => Shapes::GENERAL,
        };
        ProtocolInfo {
            name,
            consistency,
            consistency_for: None,
            implemented: false,
            summary,
            params: &[],
            shapes,
            services: no_services,
            counters: no_counters,
        }
    }

    /// What a deployment with `params` promises: the catalog's level,
    /// unless a parameter of the protocol gives something up.
    pub fn promise(&self, params: &Params) -> Consistency {
        self.consistency_for.map_or(self.consistency, |f| f(params))
    }

    /// The topology this protocol runs on for `spec`: its parameters
    /// checked, its services placed. Errors name the parameter at fault
    /// (`parameter `NAME` ...`) as `Params::check_known` does.
    pub fn topology(&self, params: &Params, spec: &ClusterSpec) -> Result<Topology, String> {
        params.check_known(self.name, self.params)?;
        let services = (self.services)(params);
        for svc in &services {
            svc.place(spec)?;
        }
        Ok(Topology::build(spec, &services))
    }
}
