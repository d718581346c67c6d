//! Meridian's core: the vocabulary every layer shares.
//!
//! Identifiers, time, the seeded random stream, topology and latency
//! presets, transaction programs, protocol parameters, and the sans-IO
//! [`Process`]/[`Env`] contract that protocols implement and drivers (the
//! simulator, the real runtime) execute. Nothing here performs I/O.

pub mod catalog;
pub mod driver;
pub mod effects;
pub mod hint;
pub mod ids;
pub mod latency;
pub mod params;
pub mod procedure;
pub mod process;
pub mod program;
pub mod rng;
pub mod strings;
pub mod time;
pub mod topology;
pub mod tpcc;

pub use catalog::ProtocolInfo;
pub use driver::{ClientIo, Clients};
pub use effects::{Effect, Effects, EffectsOf, Hand, NextIds, Now, Recorder};
pub use ids::{Key, Lsn, NodeId, RegionId, RequestId, ShardId, Stream, TimerId, TxnId};
pub use latency::LatencyMatrix;
pub use params::{CounterDoc, ParamDoc, ParamReader, ParamValue, Params, Rounding, ticks_of};
pub use procedure::{Need, Procedure, ReadMap, Step};
pub use process::{
    Consistency, CopyState, Ctx, Deployment, Env, Mapped, Message, ProcedureSupport, Process, Protocol, Settled,
    Shapes, TimerTag,
};
pub use program::{
    AbortReason, Data, Execution, KeyList, Named, Op, OpResult, Outcome, Piece, Program, ReadMode, Value,
};
pub use rng::Rng;
pub use time::{NS_PER_MS, NS_PER_S, NS_PER_US, TrueTime, ms_to_ns, ns_to_ms, us_to_ns};
pub use topology::{ClusterSpec, KeyLayout, LeaderPlacement, NodeInfo, Placement, Role, ServiceSpec, Topology};
