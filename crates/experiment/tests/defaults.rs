//! What a minimal file means (every default), explicit latency matrices,
//! protocol parameters, and the CLI overrides.

use meridian_core::{LeaderPlacement, ParamValue, RegionId};
use meridian_experiment::{ClientMode, Experiment};
use meridian_workload::{ShardsPerTxn, WorkloadKind};

const MINIMAL: &str = r#"
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]

[protocol]
name = "2pl-paxos"
"#;

fn parse(text: &str) -> Experiment {
    Experiment::from_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn minimal_file_takes_every_default() {
    let e = parse(MINIMAL);
    assert_eq!(e.cluster.shards, 1);
    assert_eq!(e.cluster.replicas_per_shard, 3);
    assert_eq!(e.cluster.leaders, LeaderPlacement::Colocated);
    assert_eq!(e.clients.regions, e.cluster.server_regions);
    assert_eq!(e.clients.per_region, 1);
    assert_eq!(e.clients.mode, ClientMode::Closed { think_ms: 0.0, sessions: 1 });
    assert_eq!((e.clients.max_retries, e.clients.retry_backoff_ms), (5, 5.0));
    assert_eq!(e.workload.kind, WorkloadKind::Microbench);
    assert_eq!(e.workload.shards_per_txn(e.cluster.shards), ShardsPerTxn::Fixed(1));
    assert_eq!((e.clock.offset_ms_stddev, e.clock.drift_ppm, e.clock.epsilon_us), (0.0, 0.0, 100.0));
    assert!(e.clock.offset_ms_by_node.is_empty() && e.clock.offset_ms_by_region.is_empty());
    assert_eq!((e.network.jitter_ms, e.network.loss, e.network.duplicate), (0.0, 0.0, 0.0));
    assert!(!e.network.reorder);
    assert_eq!((e.cpu.server_us_per_msg, e.cpu.client_us_per_msg), (19.0, 13.0));
    assert_eq!(e.cpu.service_us_per_msg, 19.0, "services cost what servers do");
    assert_eq!((e.cpu.server_ns_per_byte, e.cpu.client_ns_per_byte, e.cpu.service_ns_per_byte), (3.0, 3.0, 3.0));
    assert_eq!((e.cpu.server_ns_per_key, e.cpu.client_ns_per_key, e.cpu.service_ns_per_key), (0.0, 0.0, 0.0));
    assert_eq!((e.cpu.server_ns_per_field, e.cpu.client_ns_per_field, e.cpu.service_ns_per_field), (0.0, 0.0, 0.0));
    assert_eq!(e.network.bandwidth_gbps, 0.0, "unlimited");
    assert_eq!(e.disk.fsync_ms, 0.1);
    assert!(e.faults.is_empty());
    assert_eq!((e.run.duration_s, e.run.warmup_s, e.run.drain_s, e.run.seed), (10.0, 1.0, 5.0, 1));
    assert_eq!(e.run.duration_ns(), 10_000_000_000);
    assert_eq!(e.protocol.params.iter().count(), 0);
    assert_eq!(e.matrix().regions.len(), 4);
    assert_eq!(e.matrix().rtt_ms(0, 0), 0.2);
}

#[test]
fn open_loop_defaults_max_outstanding() {
    let e = parse(&MINIMAL.replace("[protocol]", "[clients]\nmode = \"open\"\nrate_tps = 50\n\n[protocol]"));
    assert_eq!(e.clients.mode, ClientMode::Open { rate_tps: 50.0, max_outstanding: 100 });
}

#[test]
fn cluster_spec_resolves_region_ids() {
    let e = parse(
        &MINIMAL
            .replace("[protocol]", "[clients]\nregions = [\"hong-kong\", \"finland\"]\nper_region = 3\n\n[protocol]"),
    );
    let spec = e.cluster_spec();
    assert_eq!(spec.regions, ["south-carolina", "finland", "brazil", "hong-kong"]);
    assert_eq!(spec.server_regions, [RegionId(0), RegionId(1), RegionId(2)]);
    assert_eq!(spec.client_regions, [RegionId(3), RegionId(1)]);
    assert_eq!(spec.clients_per_region, 3);
    assert_eq!(e.clients.total(), 6);
}

#[test]
fn explicit_matrix_with_hyphenated_names() {
    let text = r#"
[cluster]
server_regions = ["us-east", "us-west"]
shards = 2

[clients]
regions = ["us-east", "eu-central"]

[network]
rtt_ms = { "us-east-us-west" = 70.0, "us-east-eu-central" = 90.0, "us-west-eu-central" = 150 }
local_rtt_ms = 0.4

[protocol]
name = "2pl-paxos"
"#;
    let e = parse(text);
    assert_eq!(e.cluster.preset, None);
    let m = e.matrix();
    assert_eq!(m.regions, ["us-east", "us-west", "eu-central"]);
    assert_eq!(m.rtt_ms(0, 1), 70.0);
    assert_eq!(m.rtt_ms(2, 1), 150.0);
    assert_eq!(m.rtt_ms(2, 2), 0.4);
    assert_eq!(e.cluster_spec().client_regions, [RegionId(0), RegionId(2)]);
}

#[test]
fn local_rtt_overrides_a_presets_diagonal() {
    let e = parse(&MINIMAL.replace("[protocol]", "[network]\nlocal_rtt_ms = 1.0\n\n[protocol]"));
    assert_eq!(e.matrix().rtt_ms(1, 1), 1.0);
    assert_eq!(e.matrix().rtt_ms(0, 1), 114.0);
}

#[test]
fn protocol_params_are_typed() {
    let e = parse(&format!(
        "{MINIMAL}\n[protocol.params]\npreventive = true\nbatch = 5\nheadroom_delta_ms = -2.5\nmode = \"ha\"\n"
    ));
    let p = &e.protocol.params;
    assert_eq!(p.bool_or("preventive", false), Ok(true));
    assert_eq!(p.u64_or("batch", 0), Ok(5));
    assert_eq!(p.f64_or("headroom_delta_ms", 0.0), Ok(-2.5));
    assert_eq!(p.str_or("mode", ""), Ok("ha"));
    let values: Vec<&ParamValue> = p.iter().map(|(_, v)| v).collect();
    assert_eq!(values.len(), 4);
}

#[test]
fn overrides_replace_protocol_and_seed() {
    let mut e = parse(&format!("{MINIMAL}\n[protocol.params]\nx = 1\n"));
    e.apply_overrides(None, Some(99));
    assert_eq!(e.run.seed, 99);
    assert_eq!(e.protocol.name, "2pl-paxos");
    e.set_protocol("2pl-paxos");
    assert_eq!(e.protocol.params.iter().count(), 1, "same protocol keeps its params");
    e.apply_overrides(Some("tiga"), None);
    assert_eq!(e.protocol.name, "tiga");
    assert_eq!(e.protocol.params.iter().count(), 0, "params of another protocol are dropped");
    e.set_seed(7);
    assert_eq!(e.run.seed, 7);
}

#[test]
fn warmup_default_scales_with_duration() {
    let e = parse(&MINIMAL.replace("[protocol]", "[run]\nduration_s = 2.0\n\n[protocol]"));
    assert_eq!(e.run.warmup_s, 0.2);
}
