//! Who is calling: dashboard users (passwords, sessions) and producers (API keys).

pub mod api_key;
pub mod ingest_rate;
pub mod password;
pub mod throttle;
