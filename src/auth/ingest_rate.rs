//! Events each account may send per second to this node (`--ingest-rate-limit`):
//! one noisy tenant cannot take the ingest path from the others. Counted in
//! memory per node, in whole seconds of the code's clock; over the budget
//! the answer says when the next second starts.

use std::{collections::HashMap, sync::Mutex};

use crate::clock::Timestamp;

#[derive(Debug, Default)]
pub struct IngestRate {
    /// `None`: unlimited.
    per_second: Option<u32>,
    /// Each account's current second and how many it sent in it.
    spent: Mutex<HashMap<String, (i64, u32)>>,
}

/// Accounts remembered before stale seconds are swept out.
const SWEEP_AT: usize = 10_000;

impl IngestRate {
    pub fn new(per_second: Option<u32>) -> IngestRate {
        IngestRate {
            per_second,
            spent: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one event of `account` at `now`; over the budget, the
    /// milliseconds until the next second instead.
    pub fn spend(&self, account: &str, now: Timestamp) -> Result<(), u64> {
        let Some(most) = self.per_second else {
            return Ok(());
        };
        let second = now.millis().div_euclid(1000);
        let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
        if spent.len() >= SWEEP_AT {
            spent.retain(|_, (s, _)| *s == second);
        }
        let entry = spent.entry(account.to_string()).or_insert((second, 0));
        if entry.0 != second {
            *entry = (second, 0);
        }
        if entry.1 >= most {
            return Err(u64::try_from(1000 - now.millis().rem_euclid(1000)).unwrap_or(1000));
        }
        entry.1 += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_account_gets_its_own_budget_each_second() {
        let rate = IngestRate::new(Some(3));
        let at = |ms: i64| Timestamp(1_000_000 + ms);
        for _ in 0..3 {
            assert_eq!(rate.spend("a", at(100)), Ok(()));
        }
        assert_eq!(rate.spend("a", at(250)), Err(750));
        assert_eq!(
            rate.spend("b", at(250)),
            Ok(()),
            "another account's own budget"
        );
        assert_eq!(rate.spend("a", at(1000)), Ok(()), "a new second");
        let unlimited = IngestRate::new(None);
        for _ in 0..10_000 {
            assert_eq!(unlimited.spend("a", at(0)), Ok(()));
        }
    }

    #[test]
    fn stale_accounts_are_swept() {
        let rate = IngestRate::new(Some(1));
        for n in 0..SWEEP_AT {
            rate.spend(&format!("acc_{n}"), Timestamp(0)).unwrap();
        }
        rate.spend("late", Timestamp(5_000)).unwrap();
        assert_eq!(rate.spent.lock().unwrap().len(), 1);
    }
}
