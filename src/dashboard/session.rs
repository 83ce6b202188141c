//! Dashboard sessions: the cookie, and the keys a session record holds.
//! The records themselves live in the database (`store::Sessions`).

use tower_sessions::{
    cookie::{time::Duration, SameSite},
    session_store::ExpiredDeletion,
    Expiry, SessionManagerLayer,
};

use crate::store::Sessions;

pub const USER_ID_KEY: &str = "user_id";
/// When the user signed in and when they were last seen, in the code's
/// clock (milliseconds), for the absolute and idle timeouts.
pub const SIGNED_IN_AT_KEY: &str = "signed_in_at";
pub const SEEN_AT_KEY: &str = "seen_at";
/// The user's session epoch at sign-in; a password reset moves it on.
pub const SESSION_EPOCH_KEY: &str = "session_epoch";
pub const COOKIE_NAME: &str = "dakghar_session";
/// Over https the browser only accepts this name with `Secure`, `Path=/`
/// and no `Domain`: a sibling subdomain cannot plant or shadow it.
pub const SECURE_COOKIE_NAME: &str = "__Host-dakghar_session";

/// The cookie and the stored record expire after `idle` without use;
/// the guard enforces both timeouts on the code's clock as well.
pub fn layer(
    sessions: &Sessions,
    secure: bool,
    idle: std::time::Duration,
) -> SessionManagerLayer<Sessions> {
    let idle = Duration::try_from(idle).unwrap_or(Duration::hours(12));
    SessionManagerLayer::new(sessions.clone())
        .with_name(if secure {
            SECURE_COOKIE_NAME
        } else {
            COOKIE_NAME
        })
        .with_path("/")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(idle))
}

/// Removes expired sessions now and then, for as long as the server runs.
pub fn spawn_cleaner(sessions: &Sessions) {
    let sessions = sessions.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            every.tick().await;
            if let Err(e) = sessions.delete_expired().await {
                tracing::warn!(error = %e, "could not delete expired sessions");
            }
        }
    });
}
