//! Server functions, one per file, grouped by domain. Each stays thin: it
//! asks the server's `Dashboard` port and returns what the page shows.

pub mod account;
pub mod admin;
pub mod endpoints;
pub mod events;
pub mod me;
pub mod team;
