//! Each class of mistake in an experiment file yields a one-line error with
//! the right file, line and dotted field.

use meridian_core::Topology;
use meridian_experiment::{ConfigError, Experiment, FaultKind, PartitionTarget};

const BASE: &str = r#"[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]
shards = 3
replicas_per_shard = 3

[clients]
regions = ["south-carolina", "hong-kong"]
per_region = 2
mode = "open"
rate_tps = 100

[workload]
kind = "microbench"

[clock]
offset_ms_stddev = 0.0

[network]
loss = 0.0

[run]
duration_s = 30.0
warmup_s = 5.0

[protocol]
name = "2pl-paxos"
"#;

/// BASE with `from` replaced by `to` (which must be present).
fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

fn err(text: &str) -> ConfigError {
    match Experiment::from_str(text, "x.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.contains('\n'), "multi-line error: {shown}");
            assert!(shown.starts_with("x.toml"), "{shown}");
            e
        }
    }
}

#[track_caller]
fn expect(e: &ConfigError, line: Option<usize>, field: &str, needle: &str) {
    assert_eq!(e.line, line, "{e}");
    assert_eq!(e.field, field, "{e}");
    assert!(e.message.contains(needle), "`{needle}` not in: {e}");
}

#[test]
fn base_is_valid() {
    Experiment::from_str(BASE, "x.toml").unwrap();
}

#[test]
fn syntax_errors_name_line_and_field() {
    let e = err(&edit("shards = 3", "shards = "));
    expect(&e, Some(4), "cluster.shards", "invalid TOML");
    let e = err(&edit("[clock]", "[clock"));
    expect(&e, Some(16), "clock", "invalid TOML");
    let e = err(&edit("shards = 3", "shards = 3\nshards = 4"));
    expect(&e, Some(5), "cluster.shards", "duplicate");
}

#[test]
fn unknown_fields_list_the_known_ones_and_suggest() {
    let e = err(&edit("offset_ms_stddev = 0.0", "offset_ms_stdev = 0.0"));
    expect(&e, Some(17), "clock.offset_ms_stdev", "unknown field, expected one of offset_ms_stddev, drift_ppm");
    assert!(e.message.contains("did you mean offset_ms_stddev?"), "{e}");
    assert_eq!(
        e.to_string().split(": ").take(3).collect::<Vec<_>>(),
        [
            "x.toml:17",
            "clock.offset_ms_stdev",
            "unknown field, expected one of offset_ms_stddev, drift_ppm, epsilon_us, offset_ms_by_node, offset_ms_by_region (did you mean offset_ms_stddev?)"
        ]
    );
    let e = err(&format!("{BASE}\n[clocks]\ndrift_ppm = 1.0\n"));
    expect(&e, Some(29), "clocks", "unknown section");
    let e = err(&edit("kind = \"microbench\"", "kind = \"microbench\"\nzipff = 0.5"));
    expect(&e, Some(15), "workload.zipff", "did you mean zipf?");
}

#[test]
fn wrong_types_name_the_field() {
    let e = err(&edit("shards = 3", "shards = \"three\""));
    expect(&e, Some(4), "cluster.shards", "expected a non-negative integer");
    let e = err(&edit("loss = 0.0", "loss = true"));
    expect(&e, Some(20), "network.loss", "expected a number");
    let e = err(&edit("shards = 3", "shards = -3"));
    expect(&e, Some(4), "cluster.shards", "-3");
    let e = err(&edit("per_region = 2", "per_region = [2]"));
    expect(&e, Some(9), "clients.per_region", "array");
}

#[test]
fn missing_required_fields_and_sections() {
    let e = err(&edit("server_regions = [\"south-carolina\", \"finland\", \"brazil\"]\n", ""));
    expect(&e, Some(1), "cluster.server_regions", "required field is missing");
    let e = err(&edit("[protocol]\nname = \"2pl-paxos\"\n", ""));
    expect(&e, None, "protocol", "required section [protocol] is missing");
    assert_eq!(e.to_string(), "x.toml: protocol: required section [protocol] is missing");
    let e = err(&edit("preset = \"tiga-gcp\"\n", ""));
    expect(&e, Some(1), "cluster.preset", "tiga-gcp, k2-five-regions");
}

#[test]
fn bad_values_are_rejected_at_their_line() {
    let e = err(&edit("rate_tps = 100", "rate_tps = -5"));
    expect(&e, Some(11), "clients.rate_tps", "> 0");
    let e = err(&edit("loss = 0.0", "loss = 1.5"));
    expect(&e, Some(20), "network.loss", "between 0 and 1");
    let e = err(&edit("offset_ms_stddev = 0.0", "offset_ms_stddev = nan"));
    expect(&e, Some(17), "clock.offset_ms_stddev", "between 0 and");
    let e = err(&edit("shards = 3", "shards = 0"));
    expect(&e, Some(4), "cluster.shards", "at least 1");
    let e = err(&edit("rate_tps = 100", "think_ms = 3.0"));
    expect(&e, Some(11), "clients.think_ms", "mode = \"closed\"");
    let e = err(&edit("rate_tps = 100\n", ""));
    expect(&e, Some(7), "clients.rate_tps", "required with mode = \"open\"");
}

#[test]
fn unknown_presets_and_regions_list_the_valid_ones() {
    let e = err(&edit("preset = \"tiga-gcp\"", "preset = \"tiga-gpc\""));
    expect(
        &e,
        Some(2),
        "cluster.preset",
        "unknown preset `tiga-gpc` (presets: tiga-gcp, k2-five-regions, starry-three-regions, slog-six-regions)",
    );
    let e = err(&edit("\"finland\", \"brazil\"]", "\"finland\", \"brasil\"]"));
    expect(
        &e,
        Some(3),
        "cluster.server_regions",
        "unknown region `brasil` (regions: south-carolina, finland, brazil, hong-kong)",
    );
    let e = err(&edit("\"south-carolina\", \"hong-kong\"]", "\"south-carolina\", \"tokyo\"]"));
    expect(&e, Some(8), "clients.regions", "`tokyo`");
    let e = err(&edit("\"finland\", \"brazil\"]", "\"finland\", \"finland\"]"));
    expect(&e, Some(3), "cluster.server_regions", "listed twice");
    let e = err(&edit("[clock]", "[clock]\noffset_ms_by_region = { mars = 1.0 }"));
    expect(&e, Some(17), "clock.offset_ms_by_region.mars", "unknown region `mars`");
}

#[test]
fn explicit_matrices_are_checked() {
    let both = edit("loss = 0.0", "loss = 0.0\nrtt_ms = { \"a-b\" = 1.0 }");
    let e = err(&both);
    expect(&e, Some(21), "network.rtt_ms", "not both");
    let missing_pair = both.replace("preset = \"tiga-gcp\"\n", "");
    let e = err(&missing_pair);
    expect(&e, Some(2), "cluster.server_regions", "unknown region `south-carolina` (regions: a, b)");
    let negative = edit("preset = \"tiga-gcp\"\n", "")
        .replace("loss = 0.0", "loss = 0.0\nrtt_ms = { \"south-carolina-finland\" = -1.0 }");
    let e = err(&negative);
    expect(&e, Some(20), "network.rtt_ms.south-carolina-finland", "between 0 and");
    let incomplete = edit("preset = \"tiga-gcp\"\n", "")
        .replace("loss = 0.0", "loss = 0.0\nrtt_ms = { \"south-carolina-finland\" = 10.0, \"finland-brazil\" = 20.0 }");
    let e = err(&incomplete);
    expect(&e, Some(20), "network.rtt_ms", "no rtt given between");
}

#[test]
fn warmup_must_be_shorter_than_duration() {
    let e = err(&edit("warmup_s = 5.0", "warmup_s = 30.0"));
    expect(&e, Some(24), "run.warmup_s", "shorter than duration_s");
    let e = err(&edit("duration_s = 30.0", "duration_s = 0"));
    expect(&e, Some(23), "run.duration_s", "> 0");
}

#[test]
fn workload_errors_name_the_workload_field() {
    let e = err(&edit("kind = \"microbench\"", "kind = \"tpc-c\""));
    expect(&e, Some(14), "workload.kind", "unknown variant `tpc-c`");
    let e = err(&edit("kind = \"microbench\"", "kind = \"tpcc\"\nwarehouses = 0"));
    expect(&e, Some(15), "workload.warehouses", "between 1 and");
    let e = err(&edit("kind = \"microbench\"", "kind = \"tpcc\"\nzipf = 0.5"));
    expect(&e, Some(15), "workload.zipf", "only to kind =");
    let e = err(&edit("kind = \"microbench\"", "kind = \"ycsb-t\"\nby_last_name_pct = 60"));
    expect(&e, Some(15), "workload.by_last_name_pct", "only to kind = \"tpcc\"");
    let e = err(&edit("kind = \"microbench\"", "kind = \"tpcc\"\nmix = [50.0, 50.0]"));
    expect(&e, Some(15), "workload.mix", "five non-negative percentages");
    let e = err(&edit("kind = \"microbench\"", "kind = \"microbench\"\nshards_per_txn = 4"));
    expect(&e, Some(15), "workload.shards_per_txn", "exceeds the cluster's 3 shard(s)");
    let e = err(&edit("kind = \"microbench\"", "kind = \"ycsb-t\"\nshards_per_txn = [1, 2, 3]"));
    expect(&e, Some(15), "workload.shards_per_txn", "range");
    let e = err(&edit("kind = \"microbench\"", "kind = \"ycsb-t\"\nread_ratio = 2.0"));
    expect(&e, Some(15), "workload.read_ratio", "between 0 and 1");
}

fn with_faults(faults: &str) -> String {
    format!("{BASE}\n{faults}")
}

#[test]
fn faults_are_checked_in_order_and_by_kind() {
    let e = err(&with_faults("[[faults]]\nat_s = 10.0\nkind = \"heal\"\n\n[[faults]]\nat_s = 5.0\nkind = \"heal\"\n"));
    expect(&e, Some(34), "faults[1].at_s", "time order");
    assert!(e.message.contains("line 29"), "{e}");
    let e = err(&with_faults("[[faults]]\nat_s = 1.0\nkind = \"crash\"\n"));
    expect(&e, Some(29), "faults[0].node", "required (crash takes node)");
    let e = err(&with_faults("[[faults]]\nat_s = 1.0\nkind = \"heal\"\nnode = \"x\"\n"));
    expect(&e, Some(32), "faults[0].node", "not used by this fault");
    let e = err(&with_faults("[[faults]]\nat_s = 1.0\nkind = \"explode\"\n"));
    expect(&e, Some(31), "faults[0].kind", "unknown variant `explode`");
    let e = err(&with_faults("[[faults]]\nat_s = 1.0\nkind = \"partition\"\nregions = [\"atlantis\"]\n"));
    expect(&e, Some(32), "faults[0].regions", "unknown region `atlantis`");
    let e = err(&with_faults("[[faults]]\nat_s = 1.0\nkind = \"clock-jump\"\nnode = \"shard0-replica0\"\n"));
    expect(&e, Some(29), "faults[0].by_ms", "required");
    let e = err(&with_faults("[[faults]]\nat_s = 100.0\nkind = \"heal\"\n"));
    expect(&e, Some(30), "faults[0].at_s", "after the run ends");
    let e = err(&with_faults("[[faults]]\nkind = \"heal\"\n"));
    expect(&e, Some(29), "faults[0].at_s", "required field is missing");
}

#[test]
fn a_partition_of_links_takes_pairs_of_two_different_nodes_and_nothing_else() {
    let partition = |target: &str| with_faults(&format!("[[faults]]\nat_s = 1.0\nkind = \"partition\"\n{target}\n"));
    let ok =
        partition("links = [[\"shard0-replica0\", \"shard0-replica1\"], [\"shard0-replica0\", \"shard0-replica2\"]]");
    let exp = Experiment::from_str(&ok, "x.toml").unwrap();
    let pairs = [("shard0-replica0", "shard0-replica1"), ("shard0-replica0", "shard0-replica2")];
    let want: Vec<(String, String)> = pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(exp.faults[0].kind, FaultKind::Partition(PartitionTarget::Links(want)));
    let e = err(&partition("links = []"));
    expect(&e, Some(32), "faults[0].links", "at least one link");
    let e = err(&partition("links = [[\"shard0-replica0\"]]"));
    expect(&e, Some(32), "faults[0].links", "link 0 is [\"shard0-replica0\"]; a link is a pair");
    let e = err(&partition("links = [[\"shard0-replica0\", \"shard0-replica0\"]]"));
    expect(&e, Some(32), "faults[0].links", "joins shard0-replica0 to itself");
    let e = err(&partition("nodes = [\"shard0-replica0\"]\nlinks = [[\"shard0-replica0\", \"shard0-replica1\"]]"));
    expect(&e, Some(33), "faults[0].links", "not nodes and links");
    let e = err(&partition(""));
    expect(&e, Some(29), "faults[0].regions", "links = [[a, b], ...] or one_way = [[from, to], ...]");
    let unknown = partition("links = [[\"shard0-replica0\", \"shard7-replica1\"]]");
    let exp = Experiment::from_str(&unknown, "x.toml").unwrap();
    let e = exp.check_node_names(&Topology::build(&exp.cluster_spec(), &[])).unwrap_err();
    expect(&e, Some(32), "faults[0].links", "unknown node `shard7-replica1`");
}

#[test]
fn a_one_way_partition_takes_ordered_pairs_of_two_different_nodes_and_nothing_else() {
    let partition = |target: &str| with_faults(&format!("[[faults]]\nat_s = 1.0\nkind = \"partition\"\n{target}\n"));
    let ok = partition("one_way = [[\"shard0-replica1\", \"shard0-replica0\"]]");
    let exp = Experiment::from_str(&ok, "x.toml").unwrap();
    let want = vec![("shard0-replica1".to_string(), "shard0-replica0".to_string())];
    assert_eq!(exp.faults[0].kind, FaultKind::Partition(PartitionTarget::OneWay(want)), "kept in its order");
    let e = err(&partition("one_way = []"));
    expect(&e, Some(32), "faults[0].one_way", "at least one link");
    let e = err(&partition("one_way = [[\"shard0-replica0\", \"shard0-replica1\", \"shard0-replica2\"]]"));
    expect(&e, Some(32), "faults[0].one_way", "link 0 is");
    let e = err(&partition("one_way = [[\"shard0-replica0\", \"shard0-replica0\"]]"));
    expect(&e, Some(32), "faults[0].one_way", "joins shard0-replica0 to itself");
    let e = err(&partition(
        "links = [[\"shard0-replica0\", \"shard0-replica1\"]]\none_way = [[\"shard0-replica0\", \"shard0-replica1\"]]",
    ));
    expect(&e, Some(33), "faults[0].one_way", "not links and one_way");
    let e = err(&with_faults("[[faults]]\nat_s = 1.0\nkind = \"heal\"\none_way = [[\"a\", \"b\"]]\n"));
    expect(&e, Some(32), "faults[0].one_way", "not used by this fault");
    let unknown = partition("one_way = [[\"shard9-replica0\", \"shard0-replica1\"]]");
    let exp = Experiment::from_str(&unknown, "x.toml").unwrap();
    let e = exp.check_node_names(&Topology::build(&exp.cluster_spec(), &[])).unwrap_err();
    expect(&e, Some(32), "faults[0].one_way", "unknown node `shard9-replica0`");
}

#[test]
fn sections_of_the_wrong_shape_are_named() {
    let e = err(&edit("[run]", "[[run]]"));
    expect(&e, Some(22), "run", "written [run]");
    let e = err(&with_faults("[faults]\nat_s = 1.0\nkind = \"heal\"\n"));
    expect(&e, Some(29), "faults", "[[faults]]");
    let e = err(&format!("cpu = 3\n{BASE}"));
    expect(&e, Some(1), "cpu", "must be a table");
}

#[test]
fn protocol_params_must_be_scalars() {
    let e = err(&format!("{BASE}\n[protocol.params]\nok = 1\nlist = [1, 2]\n"));
    expect(&e, Some(31), "protocol.params.list", "not array");
    let e = err(&edit("name = \"2pl-paxos\"", "name = \"\""));
    expect(&e, Some(27), "protocol.name", "must name a protocol");
}

#[test]
fn node_names_are_checked_against_the_topology() {
    let text = with_faults(
        "[[faults]]\nat_s = 1.0\nkind = \"crash\"\nnode = \"shard0-replica0\"\n\n[[faults]]\nat_s = 2.0\nkind = \"partition\"\nnodes = [\"shard1-replica1\", \"shard9-replica0\"]\n",
    );
    let exp = Experiment::from_str(&text, "x.toml").unwrap();
    let topology = Topology::build(&exp.cluster_spec(), &[]);
    let e = exp.check_node_names(&topology).unwrap_err();
    expect(&e, Some(37), "faults[1].nodes", "unknown node `shard9-replica0`");
    assert!(e.message.contains("shard0-replica0, shard0-replica1"), "{e}");
    assert!(e.message.contains("client-south-carolina-0"), "{e}");

    let text = edit("offset_ms_stddev = 0.0", "offset_ms_by_node = { \"shard0-replca0\" = 5.0 }");
    let exp = Experiment::from_str(&text, "x.toml").unwrap();
    let topology = Topology::build(&exp.cluster_spec(), &[]);
    let e = exp.check_node_names(&topology).unwrap_err();
    expect(&e, Some(17), "clock.offset_ms_by_node.shard0-replca0", "did you mean shard0-replica0?");
}

#[test]
fn unreadable_files_are_config_errors() {
    let e = Experiment::load(std::path::Path::new("/nonexistent/exp.toml")).unwrap_err();
    assert_eq!(e.file, "/nonexistent/exp.toml");
    assert_eq!(e.line, None);
    assert!(e.to_string().starts_with("/nonexistent/exp.toml: cannot read the file"), "{e}");
}

#[test]
fn callers_can_place_their_own_errors() {
    let exp = Experiment::from_str(BASE, "x.toml").unwrap();
    let e = exp.error_at("protocol.name", "unknown protocol `2pl-paxos`");
    assert_eq!(e.to_string(), "x.toml:27: protocol.name: unknown protocol `2pl-paxos`");
    let e = exp.error_at("protocol.params.fast", "unknown parameter");
    assert_eq!(e.line, Some(26), "falls back to [protocol]");
}

#[test]
fn huge_times_and_drifts_are_rejected_before_they_can_overflow() {
    let e = err(&edit("loss = 0.0", "loss = 0.0\njitter_ms = 1e300"));
    expect(&e, Some(21), "network.jitter_ms", "between 0 and 1e9");
    let e = err(&edit("offset_ms_stddev = 0.0", "offset_ms_stddev = 1e12"));
    expect(&e, Some(17), "clock.offset_ms_stddev", "between 0 and 1e9");
    let e = err(&edit("offset_ms_stddev = 0.0", "offset_ms_stddev = 0.0\ndrift_ppm = 2000000.0"));
    expect(&e, Some(18), "clock.drift_ppm", "100000 ppm");
}
