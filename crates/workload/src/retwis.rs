//! The `retwis` workload: the Twitter clone of TAPIR's and STARRY's
//! evaluations (STARRY Table 5), as per-key operations: add-user (1 read,
//! 3 writes), follow/unfollow (2 reads, 2 writes), post-tweet (3 reads, 5
//! writes), load-timeline (1 to 10 reads), in the `mix` 5/15/30/50 %, users
//! drawn by Zipf θ (`zipf`, 0.7 as STARRY §5.2 runs it) over
//! `keys_per_shard` × shards users. Reads followed by writes of the same
//! key are read-modify-write increments; new tweets are blind writes of
//! fresh keys.

use crate::spec::{SpecError, WorkloadSpec};
use crate::zipf::Zipf;
use crate::{ClientInfo, Generator, TagSource, Txn};
use meridian_core::{Key, Op, Program, Rng, Value};

/// The default mix (STARRY Table 5): add-user, follow/unfollow,
/// post-tweet, load-timeline.
pub const MIX: [f64; 4] = [5.0, 15.0, 30.0, 50.0];

/// Keys per user: profile, followers, following, posts, timeline.
const FIELDS: u64 = 5;
const PROFILE: u64 = 0;
const FOLLOWERS: u64 = 1;
const FOLLOWING: u64 = 2;
const POSTS: u64 = 3;
const TIMELINE: u64 = 4;
/// Tweets are keyed above every user field: `TWEETS + tag`.
const TWEETS: u64 = 1 << 62;

#[derive(Clone, Debug, PartialEq)]
pub struct RetwisSpec {
    pub users: u64,
    pub zipf: f64,
    pub mix: [f64; 4],
}

impl RetwisSpec {
    pub fn of(spec: &WorkloadSpec, shards: u32) -> RetwisSpec {
        RetwisSpec {
            users: spec.keys_per_shard.unwrap_or(100_000).saturating_mul(u64::from(shards.max(1))),
            zipf: spec.zipf.unwrap_or(0.7),
            mix: spec.mix.as_deref().and_then(|m| <[f64; 4]>::try_from(m).ok()).unwrap_or(MIX),
        }
    }
}

fn err(field: &'static str, message: String) -> Result<(), SpecError> {
    Err(SpecError { field, message })
}

pub fn check(spec: &WorkloadSpec, shards: u32) -> Result<(), SpecError> {
    if let Some(m) = &spec.mix {
        if m.len() != 4 || m.iter().any(|p| !p.is_finite() || *p < 0.0) || (m.iter().sum::<f64>() - 100.0).abs() > 1e-6
        {
            return err(
                "mix",
                format!(
                    "must be four non-negative percentages summing to 100 (add-user, follow, post-tweet, load-timeline), got {m:?}"
                ),
            );
        }
    }
    let s = RetwisSpec::of(spec, shards);
    if s.users < 3 || s.users > (TWEETS / FIELDS) {
        return err("keys_per_shard", format!("must give between 3 and {} users, got {}", TWEETS / FIELDS, s.users));
    }
    if !s.zipf.is_finite() || s.zipf < 0.0 {
        return err("zipf", format!("must be a number >= 0 (0 = uniform), got {}", s.zipf));
    }
    Ok(())
}

pub struct Retwis {
    spec: RetwisSpec,
    zipf: Zipf,
}

pub fn generator(spec: &WorkloadSpec, client: &ClientInfo) -> Result<Retwis, String> {
    let s = RetwisSpec::of(spec, client.layout.shards);
    let zipf = Zipf::new(s.users, s.zipf)?;
    Ok(Retwis { spec: s, zipf })
}

fn key(user: u64, field: u64) -> Key {
    Key(user * FIELDS + field)
}

impl Retwis {
    /// `n` distinct users.
    fn users(&self, rng: &mut Rng, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let u = self.zipf.sample(rng);
            if !out.contains(&u) {
                out.push(u);
            }
        }
        out
    }

    fn kind(&self, rng: &mut Rng) -> usize {
        let mut x = rng.next_f64() * 100.0;
        for (i, pct) in self.spec.mix.iter().enumerate() {
            if x < *pct {
                return i;
            }
            x -= pct;
        }
        self.spec.mix.iter().rposition(|p| *p > 0.0).unwrap_or(3)
    }
}

impl Generator for Retwis {
    fn next(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Txn {
        let inc = |tags: &mut TagSource, key| Op::Increment { key, delta: 1, tag: tags.next() };
        match self.kind(rng) {
            0 => {
                let u = self.users(rng, 1)[0];
                let mut ops = vec![inc(tags, key(u, PROFILE))];
                for field in [FOLLOWERS, FOLLOWING] {
                    ops.push(Op::Write { key: key(u, field), value: Value::int(tags.next(), 0) });
                }
                Txn::new(Program::new(ops), "add-user")
            }
            1 => {
                let u = self.users(rng, 2);
                let ops = vec![inc(tags, key(u[0], FOLLOWING)), inc(tags, key(u[1], FOLLOWERS))];
                Txn::new(Program::new(ops), "follow")
            }
            2 => {
                let u = self.users(rng, 3);
                let mut ops =
                    vec![inc(tags, key(u[0], POSTS)), inc(tags, key(u[1], TIMELINE)), inc(tags, key(u[2], TIMELINE))];
                for _ in 0..2 {
                    let tag = tags.next();
                    ops.push(Op::Write { key: Key(TWEETS + (tag & (TWEETS - 1))), value: Value::int(tag, 1) });
                }
                Txn::new(Program::new(ops), "post-tweet")
            }
            _ => {
                let n = rng.range_inclusive(1, 10) as usize;
                let ops = self.users(rng, n).into_iter().map(|u| Op::Read { key: key(u, TIMELINE) }).collect();
                Txn::new(Program::new(ops), "load-timeline")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests::client;
    use std::collections::BTreeMap;

    fn spec() -> WorkloadSpec {
        WorkloadSpec { keys_per_shard: Some(1_000), ..WorkloadSpec::new(crate::WorkloadKind::Retwis) }
    }

    fn txns(s: &WorkloadSpec, seed: u64, n: usize) -> Vec<Txn> {
        let mut g = generator(s, &client(3)).unwrap();
        let (mut rng, mut tags) = (Rng::new(seed), TagSource::new(0));
        (0..n).map(|_| g.next(&mut rng, &mut tags)).collect()
    }

    #[test]
    fn the_mix_and_each_types_reads_and_writes_follow_table_5() {
        let all = txns(&spec(), 1, 4_000);
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &all {
            *count.entry(t.label).or_default() += 1;
            let reads = t.program.ops.iter().filter(|op| op.reads()).count();
            let writes = t.program.ops.iter().filter(|op| op.writes()).count();
            let (r, w) = match t.label {
                "add-user" => (1, 3),
                "follow" => (2, 2),
                "post-tweet" => (3, 5),
                _ => (reads.clamp(1, 10), 0),
            };
            assert_eq!((reads, writes), (r, w), "{}", t.label);
        }
        let share = |l: &str| count[l] as f64 / all.len() as f64 * 100.0;
        for (l, want) in [("add-user", 5.0), ("follow", 15.0), ("post-tweet", 30.0), ("load-timeline", 50.0)] {
            assert!((share(l) - want).abs() < 3.0, "{l}: {:.1}%", share(l));
        }
        assert_eq!(txns(&spec(), 1, 30), txns(&spec(), 1, 30));
        assert_ne!(txns(&spec(), 1, 30), txns(&spec(), 2, 30));
    }

    #[test]
    fn bad_fields_are_named() {
        assert_eq!(WorkloadSpec { mix: Some(vec![50.0, 50.0]), ..spec() }.check(3).unwrap_err().field, "mix");
        assert_eq!(WorkloadSpec { zipf: Some(-0.5), ..spec() }.check(3).unwrap_err().field, "zipf");
        assert_eq!(WorkloadSpec { keys_per_shard: Some(1), ..spec() }.check(1).unwrap_err().field, "keys_per_shard");
    }
}
