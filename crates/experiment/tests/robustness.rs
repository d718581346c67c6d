//! Damaged experiment files produce errors, never panics: every example
//! with each line removed, and cut short at many points.

use meridian_core::{Rng, Topology};
use meridian_experiment::Experiment;
use meridian_workload::{ClientInfo, TagSource, generator};
use std::path::Path;

fn example_texts() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut texts: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    texts.sort();
    texts
}

/// Parses and, when that works, checks node names and draws a few
/// transactions: must not panic, and errors must be one line.
fn exercise(text: &str) {
    match Experiment::from_str(text, "damaged.toml") {
        Ok(e) => {
            let topology = Topology::build(&e.cluster_spec(), &[]);
            let _ = e.check_node_names(&topology);
            let client = &ClientInfo::all(&topology)[0];
            let mut g = generator(&e.workload, client).expect("validated workload");
            let (mut rng, mut tags) = (Rng::new(1), TagSource::new(0));
            for _ in 0..20 {
                g.next(&mut rng, &mut tags);
            }
        }
        Err(err) => assert!(!err.to_string().contains('\n'), "{err}"),
    }
}

#[test]
fn removing_any_line_never_panics() {
    for text in example_texts() {
        let lines: Vec<&str> = text.lines().collect();
        for skip in 0..lines.len() {
            let damaged: Vec<&str> = lines.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, l)| *l).collect();
            exercise(&damaged.join("\n"));
        }
    }
}

#[test]
fn truncating_anywhere_never_panics() {
    for text in example_texts() {
        for (i, _) in text.char_indices().step_by(5) {
            exercise(&text[..i]);
        }
    }
}

#[test]
fn odd_values_never_panic() {
    let base = Experiment::demo_text();
    for (from, to) in [
        ("shards = 3", "shards = 4294967295"),
        ("per_region = 2", "per_region = 4294967295"),
        ("keys_per_shard = 1000000", "keys_per_shard = 9223372036854775807"),
        ("zipf = 0.5", "zipf = inf"),
        ("keys_per_shard = 1000000", "keys_per_shard = 6148914691236517205"),
        ("zipf = 0.5", "zipf = 1e308"),
        ("zipf = 0.5", "zipf = 50"),
        ("zipf = 0.5", "zipf = 1"),
        ("duration_s = 4.0", "duration_s = 1e300"),
        ("rate_tps = 500", "rate_tps = nan"),
        ("seed = 1", "seed = -1"),
        ("replicas_per_shard = 3", "replicas_per_shard = 0"),
    ] {
        assert!(base.contains(from), "{from}");
        exercise(&base.replacen(from, to, 1));
    }
}
