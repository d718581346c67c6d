//! Every shipped experiment file parses, builds a topology whose node names
//! it uses correctly, and yields a working workload generator. (Files named
//! `cluster-*.toml` are the real runtime's cluster files, tested there.)

use meridian_core::{LeaderPlacement, Rng, Topology};
use meridian_experiment::{ClientMode, Experiment, FaultKind, PartitionTarget};
use meridian_workload::{ClientInfo, TagSource, WorkloadKind, generator};
use std::path::{Path, PathBuf};

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        // Cluster files of the real runtime, not experiments.
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("cluster-")))
        .collect();
    files.sort();
    files
}

fn load(name: &str) -> Experiment {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    Experiment::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn assert_runnable(e: &Experiment) {
    let topology = Topology::build(&e.cluster_spec(), &[]);
    e.check_node_names(&topology).unwrap_or_else(|err| panic!("{err}"));
    let client = &ClientInfo::all(&topology)[0];
    let mut g = generator(&e.workload, client).unwrap_or_else(|err| panic!("{err}"));
    let mut rng = Rng::new(e.run.seed);
    let mut tags = TagSource::new(0);
    for _ in 0..100 {
        assert!(!g.next(&mut rng, &mut tags).program.is_empty());
    }
}

#[test]
fn every_example_parses_and_is_runnable() {
    let files = examples();
    assert!(files.len() >= 5, "{files:?}");
    for path in files {
        let e = Experiment::load(&path).unwrap_or_else(|err| panic!("{err}"));
        assert_runnable(&e);
    }
}

#[test]
fn there_is_one_example_per_latency_preset() {
    let presets: Vec<String> = examples().iter().filter_map(|p| Experiment::load(p).ok()?.cluster.preset).collect();
    for preset in meridian_core::latency::PRESETS {
        assert!(presets.iter().any(|p| p == preset), "no example uses {preset}");
    }
}

#[test]
fn tiga_gcp_is_tigas_microbench_setup() {
    let e = load("tiga-gcp.toml");
    assert_eq!(e.cluster.server_regions, ["south-carolina", "finland", "brazil"]);
    assert_eq!((e.cluster.shards, e.cluster.replicas_per_shard), (3, 3));
    assert_eq!(e.cluster.leaders, LeaderPlacement::Colocated);
    assert_eq!(e.clients.regions.len(), 4);
    assert_eq!(e.clients.per_region, 2);
    assert!(matches!(e.clients.mode, ClientMode::Open { .. }));
    assert_eq!(e.workload.kind, WorkloadKind::Microbench);
    assert_eq!(e.workload.zipf(), 0.5);
    assert_eq!((e.run.duration_s, e.run.warmup_s), (30.0, 5.0));
    assert_eq!(e.protocol.name, "2pl-paxos");
    assert!(e.faults.is_empty());
}

#[test]
fn tiga_gcp_commented_faults_are_valid_when_uncommented() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiga-gcp.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("# [[faults]]\n# at_s").expect("a commented fault block");
    let end = text[start..].find("\n\n").map_or(text.len(), |i| start + i);
    let block: String = text[start..end]
        .lines()
        .map(|l| l.strip_prefix("# ").or(l.strip_prefix('#')).unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let text = format!("{}{}\n{}", &text[..start], block, &text[end..]);
    let e = Experiment::from_str(&text, "tiga-gcp-with-faults.toml").unwrap_or_else(|e| panic!("{e}"));
    let kinds: Vec<&FaultKind> = e.faults.iter().map(|f| &f.kind).collect();
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    assert!(matches!(kinds[0], FaultKind::Crash { node } if node == "shard0-replica0"));
    assert!(matches!(kinds[1], FaultKind::Restart { .. }));
    assert!(matches!(kinds[2], FaultKind::Partition(PartitionTarget::Regions(r)) if r == &["brazil"]));
    assert!(matches!(kinds[3], FaultKind::Heal));
    assert!(matches!(kinds[4], FaultKind::ClockJump { by_ms, .. } if *by_ms == 80.0));
    assert!(e.faults.windows(2).all(|w| w[0].line < w[1].line));
    assert_runnable(&e);
}

#[test]
fn demo_is_tiga_gcp_shortened() {
    let demo = Experiment::demo();
    let full = load("tiga-gcp.toml");
    assert!(demo.run.duration_s <= 10.0 && demo.run.duration_s < full.run.duration_s);
    assert_eq!(demo.cluster, full.cluster);
    assert_eq!(demo.clients, full.clients);
    assert_eq!(demo.workload, full.workload);
    assert_eq!(demo.clock, full.clock);
    assert_eq!(demo.network, full.network);
    assert_eq!(demo.cpu, full.cpu);
    assert_eq!(demo.disk, full.disk);
    assert_eq!(demo.faults, full.faults);
    assert_eq!(demo.protocol, full.protocol);
    assert_eq!(demo.matrix(), full.matrix());
    assert_eq!(demo.run.seed, full.run.seed);
    assert_runnable(&demo);
}

/// The sweep files of experiments/ (one per reproduced figure): every
/// point parses and is runnable.
#[test]
fn every_experiment_file_is_valid_at_every_point() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("experiments/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for path in files {
        let sweep = meridian_experiment::Sweep::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(sweep.len() > 1, "{}: a figure sweeps something", path.display());
        for e in sweep.validate().unwrap_or_else(|e| panic!("{e}")) {
            assert_runnable(&e);
        }
        assert!(!sweep.description.is_empty(), "{}: says what it reproduces", path.display());
    }
}
