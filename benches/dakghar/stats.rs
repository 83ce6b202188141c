//! Percentiles over a run's samples.

use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub max: Duration,
}

pub fn spread(mut samples: Vec<Duration>) -> Spread {
    samples.sort_unstable();
    let at = |q: f64| {
        if samples.is_empty() {
            return Duration::ZERO;
        }
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i]
    };
    Spread {
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
        max: samples.last().copied().unwrap_or_default(),
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
