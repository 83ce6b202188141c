//! Password hashing with argon2id at OWASP's recommended parameters
//! (19 MiB, 2 passes, 1 lane), always run off the async runtime, and never
//! more at once than the machine has cores: each hash holds 19 MiB, and a
//! flood of sign-ins must not take the memory, or the blocking threads
//! that other work needs.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc, LazyLock, OnceLock,
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use argon2::{
    password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Algorithm, Argon2, Params, Version,
};

/// Longer than any passphrase a person types; bounds hashing work per request.
pub const MAX_PASSWORD_BYTES: usize = 1024;
pub use app::model::MIN_PASSWORD_CHARS;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("password must be at least {MIN_PASSWORD_CHARS} characters")]
    TooShort,
    #[error("password must be at most {MAX_PASSWORD_BYTES} bytes")]
    TooLong,
    #[error("could not hash password: {0}")]
    Hash(String),
}

/// Every core is hashing and the short queue is full: answer 503 with
/// `Retry-After` rather than wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many sign-ins at once; try again in a second")]
pub struct Busy;

/// Turns at checking passwords for one server: at most one per core at a
/// time, and at most `QUEUE_PER_CORE` per core waiting for one.
#[derive(Debug)]
pub struct Gate {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    most_waiting: usize,
}

const QUEUE_PER_CORE: usize = 4;

impl Gate {
    pub fn new(cores: usize) -> Gate {
        Gate {
            running: Arc::new(Semaphore::new(cores)),
            waiting: AtomicUsize::new(0),
            most_waiting: cores * QUEUE_PER_CORE,
        }
    }

    /// A turn to hash, or `Busy` at once when the queue is full: for
    /// requests anyone can send (sign-in).
    pub async fn try_permit(&self) -> Result<HashPermit, Busy> {
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.most_waiting {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Busy);
        }
        let permit = Arc::clone(&self.running).acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        permit
            .map(|held| HashPermit { _held: held })
            .map_err(|_| Busy)
    }
}

impl Default for Gate {
    fn default() -> Gate {
        Gate::new(cores())
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The right to run one hash now.
pub struct HashPermit {
    _held: OwnedSemaphorePermit,
}

/// Setting a password (a reset link, an invitation, the command line): the
/// caller already proved who they are, so it waits its turn however long,
/// one hash per core at a time.
static SETTING: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(cores())));

const M_COST_KIB: u32 = 19 * 1024;
const T_COST: u32 = 2;
const P_COST: u32 = 1;

fn argon2() -> Argon2<'static> {
    let params =
        Params::new(M_COST_KIB, T_COST, P_COST, None).expect("OWASP argon2 parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// A stored hash made with other parameters (or another algorithm) than
/// today's: sign-in replaces it while the password is at hand.
pub fn needs_rehash(stored: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored) else {
        return true;
    };
    let Ok(params) = Params::try_from(&parsed) else {
        return true;
    };
    parsed.algorithm != Algorithm::Argon2id.ident()
        || parsed.version != Some(Version::V0x13.into())
        || (params.m_cost(), params.t_cost(), params.p_cost()) != (M_COST_KIB, T_COST, P_COST)
}

pub fn validate(password: &str) -> Result<(), PasswordError> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(PasswordError::TooLong);
    }
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(PasswordError::TooShort);
    }
    Ok(())
}

pub fn hash(password: &str) -> Result<String, PasswordError> {
    validate(password)?;
    let salt = SaltString::generate(&mut OsRng);
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// `hash` on the blocking pool, in its turn: argon2 takes tens of
/// milliseconds of CPU, which must not stall the async workers.
pub async fn hash_off_thread(password: String) -> Result<String, PasswordError> {
    validate(&password)?;
    let turn = Arc::clone(&SETTING)
        .acquire_owned()
        .await
        .map_err(|e| PasswordError::Hash(e.to_string()))?;
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        hash(&password)
    })
    .await
    .map_err(|e| PasswordError::Hash(e.to_string()))?
}

/// A real hash of nothing anyone knows, verified when the email is unknown,
/// so an unknown email costs the same time as a wrong password.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        let salt = SaltString::generate(&mut OsRng);
        argon2()
            .hash_password(crate::ids::random_token(32).as_bytes(), &salt)
            .map(|h| h.to_string())
            .unwrap_or_default()
    })
}

fn verify_blocking(password: &str, stored: Option<&str>) -> bool {
    let (hash, known) = match stored {
        Some(h) => (h, true),
        None => (dummy_hash(), false),
    };
    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    let ok = argon2()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok();
    ok && known
}

/// Checks `password` against `stored` (or against a dummy when the user does
/// not exist) on a blocking thread, in the turn `permit` gave. Over-long
/// input is refused before hashing.
pub async fn verify(turn: HashPermit, password: String, stored: Option<String>) -> bool {
    if password.len() > MAX_PASSWORD_BYTES {
        return false;
    }
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        verify_blocking(&password, stored.as_deref())
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_argon2id_with_owasp_parameters() {
        let h = hash("correct horse battery").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
    }

    #[tokio::test]
    async fn verifies_right_and_rejects_wrong_and_unknown() {
        let h = hash("correct horse battery").unwrap();
        let gate = Gate::new(1);
        let turn = || async { gate.try_permit().await.unwrap() };
        assert!(
            verify(
                turn().await,
                "correct horse battery".into(),
                Some(h.clone())
            )
            .await
        );
        assert!(!verify(turn().await, "wrong horse battery".into(), Some(h)).await);
        assert!(!verify(turn().await, "correct horse battery".into(), None).await);
    }

    #[tokio::test]
    async fn turns_are_one_per_core_and_the_queue_is_short() {
        let gate = Arc::new(Gate::new(2));
        let held = vec![
            gate.try_permit().await.unwrap(),
            gate.try_permit().await.unwrap(),
        ];
        // Every core busy: the next ones wait, up to the queue's length.
        let waiting: Vec<_> = (0..2 * QUEUE_PER_CORE)
            .map(|_| {
                let gate = Arc::clone(&gate);
                tokio::spawn(async move { gate.try_permit().await.is_ok() })
            })
            .collect();
        while gate.waiting.load(Ordering::SeqCst) < 2 * QUEUE_PER_CORE {
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.try_permit().await.err(), Some(Busy));
        drop(held);
        for w in waiting {
            assert!(w.await.unwrap());
        }
    }

    #[test]
    fn only_hashes_with_other_parameters_need_a_rehash() {
        assert!(!needs_rehash(&hash("correct horse battery").unwrap()));
        let salt = SaltString::generate(&mut OsRng);
        let weaker = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(8 * 1024, 1, 1, None).unwrap(),
        )
        .hash_password(b"correct horse battery", &salt)
        .unwrap()
        .to_string();
        assert!(needs_rehash(&weaker));
        assert!(needs_rehash("not a hash"));
    }

    #[test]
    fn length_limits() {
        assert!(matches!(validate("short"), Err(PasswordError::TooShort)));
        assert!(matches!(
            validate(&"x".repeat(MAX_PASSWORD_BYTES + 1)),
            Err(PasswordError::TooLong)
        ));
        assert!(validate(&"x".repeat(64)).is_ok());
    }
}
