//! Capped backoff with jitter (SPEC §4): exponential by default, linear
//! or fixed by choice (chapter 004: "max retries, base delay and strategy").

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Jitter {
    /// Uniform in [ceiling/2, ceiling]: never retries much sooner than planned.
    Equal,
    /// Uniform in [0, ceiling]: spreads retries out most.
    Full,
}

/// How the wait grows with each failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Strategy {
    /// base × 2^(n-1).
    #[default]
    Exponential,
    /// base × n.
    Linear,
    /// base, every time.
    Fixed,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Exponential => "exponential",
            Strategy::Linear => "linear",
            Strategy::Fixed => "fixed",
        }
    }

    pub fn parse(text: &str) -> Option<Strategy> {
        [Strategy::Exponential, Strategy::Linear, Strategy::Fixed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
    pub jitter: Jitter,
    pub strategy: Strategy,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(60),
            cap: Duration::from_secs(3600),
            jitter: Jitter::Equal,
            strategy: Strategy::Exponential,
        }
    }
}

impl Backoff {
    /// After the n-th failed attempt (n ≥ 1): min(base × 2^(n-1), cap),
    /// or base × n, or base, as the strategy says.
    pub fn ceiling(&self, failed_attempts: u32) -> Duration {
        let n = failed_attempts.max(1);
        let factor = match self.strategy {
            Strategy::Exponential => 1u32.checked_shl(n - 1).unwrap_or(u32::MAX),
            Strategy::Linear => n,
            Strategy::Fixed => 1,
        };
        self.base
            .checked_mul(factor)
            .unwrap_or(Duration::MAX)
            .min(self.cap)
    }

    pub fn delay(&self, failed_attempts: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling(failed_attempts);
        let floor = match self.jitter {
            Jitter::Equal => ceiling / 2,
            Jitter::Full => Duration::ZERO,
        };
        if ceiling <= floor {
            return ceiling;
        }
        let span = u64::try_from((ceiling - floor).as_millis()).unwrap_or(u64::MAX);
        floor + Duration::from_millis(rng.gen_range(0..=span))
    }
}

#[cfg(test)]
mod tests {
    use rand::{rngs::StdRng, SeedableRng};

    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn ceilings_double_then_cap_at_an_hour() {
        let b = Backoff::default();
        let expected = [1u64, 2, 4, 8, 16, 32, 60, 60, 60];
        for (i, minutes) in expected.iter().enumerate() {
            assert_eq!(
                b.ceiling(i as u32 + 1),
                MIN * *minutes as u32,
                "n={}",
                i + 1
            );
        }
        assert_eq!(b.ceiling(0), MIN, "n=0 behaves like the first failure");
        assert_eq!(
            b.ceiling(u32::MAX),
            Duration::from_secs(3600),
            "no overflow"
        );
    }

    #[test]
    fn linear_and_fixed_strategies() {
        let with = |strategy| Backoff {
            strategy,
            ..Backoff::default()
        };
        let cases = [
            (Strategy::Linear, [1u32, 2, 3, 10, 59, 60, 60]),
            (Strategy::Fixed, [1, 1, 1, 1, 1, 1, 1]),
        ];
        for (strategy, minutes) in cases {
            let b = with(strategy);
            for (n, m) in [1u32, 2, 3, 10, 59, 60, 1000].into_iter().zip(minutes) {
                assert_eq!(b.ceiling(n), MIN * m, "{strategy:?} n={n}");
            }
            assert!(
                b.ceiling(u32::MAX) <= Duration::from_secs(3600),
                "no overflow"
            );
        }
    }

    #[test]
    fn equal_jitter_stays_within_half_to_full_ceiling_for_every_n() {
        let b = Backoff::default();
        let mut rng = StdRng::seed_from_u64(7);
        for n in 1..=40 {
            let c = b.ceiling(n);
            for _ in 0..200 {
                let d = b.delay(n, &mut rng);
                assert!(
                    d >= c / 2 && d <= c,
                    "n={n}: {d:?} outside [{:?}, {c:?}]",
                    c / 2
                );
            }
        }
    }

    #[test]
    fn full_jitter_stays_within_zero_to_ceiling_and_spreads() {
        let b = Backoff {
            jitter: Jitter::Full,
            ..Backoff::default()
        };
        let mut rng = StdRng::seed_from_u64(11);
        let delays: Vec<_> = (0..500).map(|_| b.delay(3, &mut rng)).collect();
        assert!(delays.iter().all(|d| *d <= MIN * 4));
        assert!(
            delays.iter().any(|d| *d < MIN),
            "some well below half the ceiling"
        );
        assert!(delays.iter().any(|d| *d > MIN * 3));
    }
}
