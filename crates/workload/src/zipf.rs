//! Zipf-distributed ranks, after Gray et al., "Quickly Generating
//! Billion-Record Synthetic Databases" (SIGMOD 1994), as in YCSB's
//! `ZipfianGenerator`.
//!
//! Rank `r` in `[0, n)` is drawn with probability close to
//! `1 / ((r + 1)^θ · ζ(n, θ))`: rank 0 is the hottest. θ = 0 is exactly
//! uniform. Ranks 0 and 1 are exact; larger ranks use Gray's closed-form
//! inversion, written with `expm1`/`ln_1p` so that it stays accurate as θ
//! approaches 1, and replaced by its limit at θ = 1 (where Gray's
//! `1 / (1 - θ)` exponent is undefined).
//!
//! Setup computes ζ(n, θ): exactly for the first 2^12 terms and by the
//! Euler–Maclaurin formula beyond (within 1e-13 of a compensated sum of
//! every term, as a test checks, so a key space of millions costs
//! microseconds, not a million `powf`), once per
//! `(n, θ)` per process. Each draw then costs one uniform variate.

use meridian_core::Rng;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Terms of ζ(n, θ) summed exactly; the rest is integrated. From here on
/// the Euler–Maclaurin remainder after the x^−θ−5 term is of order 1e-30.
const EXACT_TERMS: u64 = 1 << 12;

/// |1 - θ| below which θ is treated as exactly 1.
const THETA_ONE_TOLERANCE: f64 = 1e-12;

/// A Zipf distribution over ranks `[0, n)` with exponent θ.
#[derive(Clone, Debug, PartialEq)]
pub struct Zipf {
    n: u64,
    theta: f64,
    zetan: f64,
    /// `1 + 0.5^θ`: below `u·ζ(n)` this, the rank is 1.
    rank1_bound: f64,
    /// Gray's η for θ ≠ 1, or the slope `c` of the θ = 1 limit.
    eta: f64,
}

impl Zipf {
    /// A distribution over `n ≥ 1` ranks with a finite exponent `θ ≥ 0`.
    pub fn new(n: u64, theta: f64) -> Result<Zipf, String> {
        if n == 0 {
            return Err("a Zipf distribution needs at least one rank".into());
        }
        if !theta.is_finite() || theta < 0.0 {
            return Err(format!("the Zipf exponent must be a finite number >= 0, got {theta}"));
        }
        if theta == 0.0 || n == 1 {
            return Ok(Zipf { n, theta, zetan: n as f64, rank1_bound: 2.0, eta: 0.0 });
        }
        let zetan = cached_zeta(n, theta);
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        Ok(Zipf { n, theta, zetan, rank1_bound: zeta2, eta: gray_eta(n, theta, zeta2, zetan) })
    }

    /// Number of ranks.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The exponent θ.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The exact Zipf probability of a rank (what draws approximate).
    pub fn probability(&self, rank: u64) -> f64 {
        if rank >= self.n { 0.0 } else { 1.0 / ((rank + 1) as f64).powf(self.theta) / self.zetan }
    }

    /// One rank in `[0, n)`.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.theta == 0.0 {
            return rng.below(self.n);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 || self.n == 1 {
            return 0;
        }
        if uz < self.rank1_bound || self.n == 2 {
            return 1;
        }
        let scale = self.inverse_scale(u);
        let rank = (self.n as f64 * scale) as u64;
        rank.clamp(2, self.n - 1)
    }

    /// Gray's `(η·u − η + 1)^(1/(1−θ))`, or its limit `exp(−c·(1 − u))`
    /// at θ = 1: the drawn rank as a fraction of `n`.
    fn inverse_scale(&self, u: f64) -> f64 {
        let eps = 1.0 - self.theta;
        if eps.abs() < THETA_ONE_TOLERANCE {
            (-self.eta * (1.0 - u)).exp()
        } else {
            ((-self.eta * (1.0 - u)).ln_1p() / eps).exp()
        }
    }
}

/// Gray's η = (1 − (2/n)^(1−θ)) / (1 − ζ(2)/ζ(n)), or at θ = 1 the slope
/// `c = ln(n/2) / (1 − ζ(2)/ζ(n))` of its limit (η ≈ (1 − θ)·c).
fn gray_eta(n: u64, theta: f64, zeta2: f64, zetan: f64) -> f64 {
    if n <= 2 {
        return 0.0;
    }
    let denominator = 1.0 - zeta2 / zetan;
    let eps = 1.0 - theta;
    let ln_2_over_n = (2.0 / n as f64).ln();
    if eps.abs() < THETA_ONE_TOLERANCE {
        -ln_2_over_n / denominator
    } else {
        -(eps * ln_2_over_n).exp_m1() / denominator
    }
}

/// ζ(n, θ), computed at most once per `(n, θ)` in this process.
fn cached_zeta(n: u64, theta: f64) -> f64 {
    static CACHE: OnceLock<Mutex<HashMap<(u64, u64), f64>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (n, theta.to_bits());
    let mut map = cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    *map.entry(key).or_insert_with(|| zeta(n, theta))
}

/// ζ(n, θ) = Σ_{i=1..n} i^−θ: the first terms exactly (smallest first, for
/// precision), the tail Σ_{i=m+1..n} by [`euler_maclaurin_tail`].
fn zeta(n: u64, theta: f64) -> f64 {
    let m = n.min(EXACT_TERMS);
    let exact: f64 = (1..=m).rev().map(|i| (i as f64).powf(-theta)).sum();
    if m == n { exact } else { exact + euler_maclaurin_tail(m as f64, n as f64, theta) }
}

/// Σ_{i=m+1..n} i^−θ by Euler–Maclaurin: ∫_m^n x^−θ dx, plus
/// (f(n) − f(m))/2, plus Σ_k B₂ₖ/(2k)! · (f⁽²ᵏ⁻¹⁾(n) − f⁽²ᵏ⁻¹⁾(m)) for
/// f(x) = x^−θ up to the fifth derivative (B₂/2! = 1/12, B₄/4! = −1/720,
/// B₆/6! = 1/30240).
fn euler_maclaurin_tail(m: f64, n: f64, theta: f64) -> f64 {
    let eps = 1.0 - theta;
    let ln_ratio = (n / m).ln();
    // m^(1−θ)·(e^((1−θ)·ln(n/m)) − 1)/(1−θ): no cancellation as θ → 1.
    let integral = if eps == 0.0 { ln_ratio } else { m.powf(eps) * (eps * ln_ratio).exp_m1() / eps };
    // f^(j)(x) = (−1)^j·θ(θ+1)…(θ+j−1)·x^(−θ−j).
    let derivative = |x: f64, j: i32| -> f64 {
        let rising: f64 = (0..j).map(|i| theta + f64::from(i)).product();
        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
        sign * rising * x.powf(-theta - f64::from(j))
    };
    let difference = |j: i32| derivative(n, j) - derivative(m, j);
    integral + difference(0) / 2.0 + difference(1) / 12.0 - difference(3) / 720.0 + difference(5) / 30240.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(z: &Zipf, seed: u64, draws: usize) -> Vec<u64> {
        let mut rng = Rng::new(seed);
        let mut counts = vec![0u64; z.n() as usize];
        for _ in 0..draws {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn theta_zero_is_uniform() {
        let z = Zipf::new(10, 0.0).unwrap();
        let draws = 100_000;
        let counts = histogram(&z, 5, draws);
        let expected = draws as f64 / 10.0;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        // 9 degrees of freedom: P(chi2 > 27.9) = 0.001.
        assert!(chi2 < 27.9, "chi-square {chi2} for {counts:?}");
    }

    #[test]
    fn theta_099_puts_most_mass_on_low_ranks() {
        let z = Zipf::new(1000, 0.99).unwrap();
        let draws = 200_000;
        let counts = histogram(&z, 9, draws);
        let low: u64 = counts[..10].iter().sum();
        let expected_low: f64 = (0..10).map(|r| z.probability(r)).sum();
        let share = low as f64 / draws as f64;
        assert!(share > 0.3, "ranks 0..10 drew only {share}");
        assert!((share - expected_low).abs() < 0.03, "{share} vs {expected_low}");
        let p0 = counts[0] as f64 / draws as f64;
        assert!((p0 - z.probability(0)).abs() < 0.01, "{p0}");
        assert!(counts[0] > counts[1] && counts[1] > counts[2]);
        assert!(counts[0] > counts[500] * 50);
    }

    #[test]
    fn theta_one_works_and_matches_its_head() {
        let z = Zipf::new(1000, 1.0).unwrap();
        let draws = 100_000;
        let counts = histogram(&z, 3, draws);
        for (rank, &count) in counts.iter().enumerate().take(2) {
            let p = count as f64 / draws as f64;
            assert!((p - z.probability(rank as u64)).abs() < 0.01, "rank {rank}: {p}");
        }
        assert!(counts.iter().skip(2).any(|&c| c > 0));
        assert!(counts[999] < counts[2]);
    }

    #[test]
    fn near_one_is_continuous_with_one() {
        let mut a = Rng::new(1);
        let mut b = Rng::new(1);
        let one = Zipf::new(10_000, 1.0).unwrap();
        let near = Zipf::new(10_000, 1.0 - 1e-9).unwrap();
        let differ = (0..10_000).filter(|_| one.sample(&mut a).abs_diff(near.sample(&mut b)) > 1).count();
        assert!(differ < 10, "{differ} draws differ");
    }

    #[test]
    fn draws_stay_in_range_for_all_shapes() {
        let mut rng = Rng::new(2);
        for n in [1, 2, 3, 7, 1000] {
            for theta in [0.0, 0.2, 0.5, 0.99, 1.0, 1.5, 4.0] {
                let z = Zipf::new(n, theta).unwrap();
                for _ in 0..2000 {
                    assert!(z.sample(&mut rng) < n, "n={n} θ={theta}");
                }
            }
        }
    }

    #[test]
    fn same_seed_same_draws() {
        let z = Zipf::new(1_000_000, 0.5).unwrap();
        assert_eq!(histogram(&z, 42, 1000), histogram(&z, 42, 1000));
        let mut a = Rng::new(42);
        let mut b = Rng::new(43);
        let xs: Vec<u64> = (0..20).map(|_| z.sample(&mut a)).collect();
        let ys: Vec<u64> = (0..20).map(|_| z.sample(&mut b)).collect();
        assert_ne!(xs, ys);
    }

    #[test]
    fn bad_parameters_are_rejected() {
        assert!(Zipf::new(0, 0.5).is_err());
        assert!(Zipf::new(10, -0.1).is_err());
        assert!(Zipf::new(10, f64::NAN).is_err());
    }

    #[test]
    fn large_key_spaces_sum_the_tail_accurately() {
        for n in [EXACT_TERMS + 1, EXACT_TERMS * 3 + 7, 1 << 20] {
            for theta in [0.2, 0.5, 0.99, 1.0 - 1e-13, 1.0, 1.5, 4.0] {
                // Compensated (Kahan) summation of every term, smallest first.
                let (mut sum, mut carry) = (0.0f64, 0.0f64);
                for i in (1..=n).rev() {
                    let y = (i as f64).powf(-theta) - carry;
                    let t = sum + y;
                    carry = (t - sum) - y;
                    sum = t;
                }
                let approx = zeta(n, theta);
                assert!((sum - approx).abs() / sum < 1e-13, "n={n} θ={theta}: {approx} vs {sum}");
            }
        }
    }
}
