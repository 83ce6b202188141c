//! The dashboard's HTTP side: sign in and out, and the guard that keeps
//! every other page behind a session.

pub(crate) mod guard;
pub(crate) mod login;
pub(crate) mod protect;
