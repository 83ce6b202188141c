//! Dakghar: webhook delivery in one binary. The server side, in layers;
//! each imports only the layers listed before it (the README's folder map
//! has the whole table):
//!
//! - base: `clock`, `ids`, `sealing`, `auth` (hashing, keys, throttle);
//! - storage: `store` (SQLite and Postgres), `metrics`;
//! - maintenance: `jobs` (alerts, mail, retention, vacuum, lease rescue);
//! - the engine: `delivery` (the embedded workers);
//! - `config`, and `context`: what every action and face shares;
//! - the domain, one home per SPEC action: `accounts`, `events`,
//!   `endpoints`, `replay`, with the crate `error` (and `demo`, which
//!   drives them);
//! - the faces over the domain, which never import each other: `api` (the
//!   REST API) and `dashboard` (the Leptos port and the browser's HTTP);
//! - `startup` (the composition root) and `cli` (the command line).
// Denied, not forbidden: one system call sets a thread's scheduling
// class (store/sqlite/checkpoints.rs), allowed where it is made.
#![deny(unsafe_code)]

pub mod accounts;
pub mod api;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod config;
pub mod context;
pub mod dashboard;
pub mod delivery;
pub mod demo;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod ids;
pub mod jobs;
pub mod metrics;
pub mod replay;
pub mod sealing;
pub mod startup;
pub mod store;
pub mod telemetry;
