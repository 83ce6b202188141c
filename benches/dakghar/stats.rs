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

/// Groups the times (seconds into a run) of its slowest samples into
/// bursts, each time at most `apart` after the one before: one stall
/// reads as one burst, a cost spread over the run as many.
/// (first time, last time, samples) for each burst, in time order.
pub fn bursts(mut times: Vec<f64>, apart: f64) -> Vec<(f64, f64, usize)> {
    times.sort_unstable_by(f64::total_cmp);
    let mut out: Vec<(f64, f64, usize)> = Vec::new();
    for t in times {
        match out.last_mut() {
            Some((_, last, n)) if t - *last <= apart => (*last, *n) = (t, *n + 1),
            _ => out.push((t, t, 1)),
        }
    }
    out
}
