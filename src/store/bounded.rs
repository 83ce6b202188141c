//! A map a node keeps in memory beside the database, shared by the tasks
//! that read it, which starts again when it reaches its bound rather than
//! grow with entries nobody asks for any more. What it holds is only ever
//! a hint the database checks (see `KeyCache` and `FanOuts`), so losing
//! it all costs a read, never a wrong answer.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
};

#[derive(Debug)]
pub struct Bounded<V> {
    most: usize,
    held: Mutex<HashMap<String, V>>,
}

impl<V: Clone> Bounded<V> {
    pub fn new(most: usize) -> Self {
        Self {
            most,
            held: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, key: &str) -> Option<V> {
        self.lock().get(key).cloned()
    }

    /// Those of `keys` held, by key.
    pub fn get_many(&self, keys: &[String]) -> HashMap<String, V> {
        let held = self.lock();
        keys.iter()
            .filter_map(|k| held.get(k).map(|v| (k.clone(), v.clone())))
            .collect()
    }

    pub fn keep(&self, key: String, value: V) {
        let mut held = self.lock();
        if held.len() >= self.most {
            held.clear();
        }
        held.insert(key, value);
    }

    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    pub fn forget_where(&self, mut doomed: impl FnMut(&V) -> bool) {
        self.lock().retain(|_, v| !doomed(v));
    }

    // A task that panicked while holding the lock left a whole map behind
    // (every change is one call on it): the rest go on with it.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, V>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_starts_again_at_its_bound_and_forgets_what_it_is_told() {
        let map = Bounded::new(2);
        map.keep("a".into(), 1);
        map.keep("b".into(), 2);
        assert_eq!(map.get("a"), Some(1));
        map.keep("c".into(), 3);
        assert_eq!(
            (map.get("a"), map.get("b"), map.get("c")),
            (None, None, Some(3))
        );
        map.keep("d".into(), 4);
        map.forget("c");
        assert_eq!(
            map.get_many(&["c".into(), "d".into()]),
            HashMap::from([("d".into(), 4)])
        );
        map.forget_where(|v| *v == 4);
        assert_eq!(map.get("d"), None);
    }
}
