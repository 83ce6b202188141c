pub mod events;
pub mod login;
pub mod not_found;
