//! Wide-area latency: the four presets of DESIGN.md and explicit matrices.
//!
//! A matrix holds round-trip times in milliseconds between regions; the
//! one-way delay is half the round trip. Both the simulator and the real
//! runtime's delay injector read the same matrix.

use serde::{Deserialize, Serialize};

/// Round-trip times between named regions.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct LatencyMatrix {
    pub regions: Vec<String>,
    /// `rtt_ms[i][j]`, symmetric; the diagonal is the intra-region RTT.
    pub rtt_ms: Vec<Vec<f64>>,
}

/// Names of the built-in presets.
pub const PRESETS: &[&str] = &["tiga-gcp", "k2-five-regions", "starry-three-regions", "slog-six-regions"];

impl LatencyMatrix {
    /// A matrix from pairs `(a, b, rtt_ms)` and an intra-region RTT. Pairs
    /// not listed are an error, as is a listed pair naming an unknown region.
    pub fn from_pairs(
        regions: &[&str],
        pairs: &[(&str, &str, f64)],
        local_rtt_ms: f64,
    ) -> Result<LatencyMatrix, String> {
        let n = regions.len();
        let mut rtt = vec![vec![f64::NAN; n]; n];
        for (i, row) in rtt.iter_mut().enumerate() {
            row[i] = local_rtt_ms;
        }
        let index =
            |name: &str| regions.iter().position(|r| *r == name).ok_or_else(|| format!("unknown region `{name}`"));
        for (a, b, ms) in pairs {
            let (i, j) = (index(a)?, index(b)?);
            if !ms.is_finite() || *ms < 0.0 {
                return Err(format!("rtt {a}-{b} must be a non-negative number of ms, got {ms}"));
            }
            rtt[i][j] = *ms;
            rtt[j][i] = *ms;
        }
        for i in 0..n {
            for j in 0..n {
                if rtt[i][j].is_nan() {
                    return Err(format!("no rtt given between `{}` and `{}`", regions[i], regions[j]));
                }
            }
        }
        Ok(LatencyMatrix { regions: regions.iter().map(|s| s.to_string()).collect(), rtt_ms: rtt })
    }

    /// One of the presets of DESIGN.md, by name.
    pub fn preset(name: &str) -> Option<LatencyMatrix> {
        let m = match name {
            "tiga-gcp" => Self::from_pairs(
                &["south-carolina", "finland", "brazil", "hong-kong"],
                &[
                    ("south-carolina", "finland", 114.0),
                    ("south-carolina", "brazil", 117.0),
                    ("finland", "brazil", 221.0),
                    ("hong-kong", "south-carolina", 197.0),
                    ("hong-kong", "finland", 251.0),
                    ("hong-kong", "brazil", 309.0),
                ],
                0.2,
            ),
            "k2-five-regions" => Self::from_pairs(
                &["shanghai", "beijing", "guangzhou", "guiyang", "singapore"],
                &[
                    ("shanghai", "beijing", 27.3),
                    ("shanghai", "guangzhou", 31.3),
                    ("shanghai", "guiyang", 29.2),
                    ("shanghai", "singapore", 69.3),
                    ("beijing", "guangzhou", 42.6),
                    ("beijing", "guiyang", 38.5),
                    ("beijing", "singapore", 77.6),
                    ("guangzhou", "guiyang", 28.0),
                    ("guangzhou", "singapore", 46.8),
                    ("guiyang", "singapore", 60.0),
                ],
                0.2,
            ),
            "starry-three-regions" => Self::from_pairs(
                &["shanghai", "san-francisco", "frankfurt"],
                &[
                    ("shanghai", "san-francisco", 140.0),
                    ("shanghai", "frankfurt", 231.0),
                    ("san-francisco", "frankfurt", 147.0),
                ],
                0.3,
            ),
            "slog-six-regions" => Self::from_pairs(
                &["virginia", "ohio", "oregon", "california", "ireland", "london"],
                &[
                    ("virginia", "ohio", 11.0),
                    ("virginia", "oregon", 67.0),
                    ("virginia", "california", 62.0),
                    ("virginia", "ireland", 68.0),
                    ("virginia", "london", 76.0),
                    ("ohio", "oregon", 50.0),
                    ("ohio", "california", 52.0),
                    ("ohio", "ireland", 79.0),
                    ("ohio", "london", 86.0),
                    ("oregon", "california", 22.0),
                    ("oregon", "ireland", 124.0),
                    ("oregon", "london", 133.0),
                    ("california", "ireland", 137.0),
                    ("california", "london", 141.0),
                    ("ireland", "london", 12.0),
                ],
                0.5,
            ),
            _ => return None,
        };
        Some(m.expect("built-in presets are complete"))
    }

    pub fn region_index(&self, name: &str) -> Option<usize> {
        self.regions.iter().position(|r| r == name)
    }

    pub fn rtt_ms(&self, a: usize, b: usize) -> f64 {
        self.rtt_ms[a][b]
    }

    /// One-way delay in nanoseconds between two regions.
    pub fn one_way_ns(&self, a: usize, b: usize) -> u64 {
        crate::time::ms_to_ns(self.rtt_ms[a][b] / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_complete_and_symmetric() {
        for name in PRESETS {
            let m = LatencyMatrix::preset(name).expect(name);
            let n = m.regions.len();
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(m.rtt_ms(i, j), m.rtt_ms(j, i), "{name}");
                    assert!(m.rtt_ms(i, j) > 0.0);
                }
            }
        }
        assert!(LatencyMatrix::preset("mars").is_none());
    }

    #[test]
    fn tiga_gcp_matches_the_design_brief() {
        let m = LatencyMatrix::preset("tiga-gcp").unwrap();
        let (sc, fi, hk) = (0, 1, 3);
        assert_eq!(m.rtt_ms(sc, fi), 114.0);
        assert_eq!(m.rtt_ms(hk, fi), 251.0);
        assert_eq!(m.one_way_ns(sc, fi), 57_000_000);
        assert_eq!(m.one_way_ns(sc, sc), 100_000);
    }

    #[test]
    fn missing_pairs_are_reported_by_name() {
        let err = LatencyMatrix::from_pairs(&["a", "b", "c"], &[("a", "b", 1.0)], 0.1).unwrap_err();
        assert!(err.contains("`a` and `c`"), "{err}");
        let err = LatencyMatrix::from_pairs(&["a"], &[("a", "z", 1.0)], 0.1).unwrap_err();
        assert!(err.contains("`z`"), "{err}");
    }
}
