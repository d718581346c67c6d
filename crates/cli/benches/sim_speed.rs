//! Simulator speed: simulated events handled per wall-clock second, on one
//! core, for the 9-server MicroBench deployment of `examples/tiga-gcp.toml`
//! (3 shards x 3 replicas, 8 open-loop clients in 4 regions, 2pl-paxos),
//! without history recording, at the example's load (500 txn/s per client)
//! and at a tenth of it. Prints the best of three runs of each.
//!
//!     cargo bench -p meridian --bench sim_speed
//!
//! Set `SIM_SPEED_CONFIG` to measure another experiment file.

use meridian_cli::runner::{RunOptions, run_experiment};
use meridian_experiment::Experiment;
use std::path::PathBuf;

fn main() {
    let path = std::env::var_os("SIM_SPEED_CONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiga-gcp.toml"));
    let exp = match Experiment::load(&path) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("sim_speed: {e}");
            std::process::exit(2);
        }
    };
    let mut light = exp.clone();
    if let meridian_experiment::ClientMode::Open { rate_tps, .. } = &mut light.clients.mode {
        *rate_tps /= 10.0;
    }
    for (label, exp) in [("example load", &exp), ("a tenth of the load", &light)] {
        let best = best_of_three(exp);
        println!(
            "sim_speed: {label}: best {:.2} M simulated events per wall-clock second ({})",
            best / 1e6,
            path.display()
        );
    }
}

fn best_of_three(exp: &Experiment) -> f64 {
    let mut best = 0.0f64;
    for run in 1..=3 {
        let out = run_experiment(exp, RunOptions::default()).expect("the example runs");
        let r = &out.report;
        println!(
            "run {run}: {} events in {:.2} s wall ({:.2} M events/s), {:.1} s simulated, {} txns committed",
            r.events,
            r.wall_s,
            r.events_per_wall_s / 1e6,
            r.simulated_s,
            r.txns.committed
        );
        best = best.max(r.events_per_wall_s);
    }
    best
}
