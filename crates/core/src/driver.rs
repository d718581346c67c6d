//! The seam between a workload driver (clients that submit transactions and
//! record what came back) and whatever runs the nodes (the simulator or the
//! real runtime).
//!
//! A driver is sans-IO as well: it is told the time and what completed, and
//! it asks for submissions and wake-ups through [`ClientIo`].

use crate::ids::{NodeId, RequestId};
use crate::program::{Outcome, Program};

/// What a driver may ask of the system that runs the nodes.
pub trait ClientIo {
    /// The true time in the simulator; the client's monotonic clock in real
    /// runs (ns).
    fn now_ns(&self) -> u64;
    /// Hands a transaction to a client node's coordinator now.
    fn submit(&mut self, client: NodeId, request: RequestId, program: Program);
    /// Calls `Clients::on_wake(client)` at `at_ns` (not before now).
    fn wake_at(&mut self, client: NodeId, at_ns: u64);
}

/// A workload driver: decides when each client submits what, and records
/// outcomes.
pub trait Clients {
    fn start(&mut self, io: &mut dyn ClientIo);
    fn on_wake(&mut self, client: NodeId, io: &mut dyn ClientIo);
    fn on_complete(&mut self, client: NodeId, request: RequestId, outcome: Outcome, io: &mut dyn ClientIo);
    /// A client node crashed: its outstanding requests will never complete.
    fn on_node_down(&mut self, _node: NodeId, _io: &mut dyn ClientIo) {}
    /// A client node restarted.
    fn on_node_up(&mut self, _node: NodeId, _io: &mut dyn ClientIo) {}
}
