//! Accounts (SPEC §1): the tenants, their users and API keys.

mod bootstrap;

pub use bootstrap::{first_admin, FirstAdmin, FIRST_ACCOUNT, FIRST_ADMIN_EMAIL};
