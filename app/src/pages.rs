pub mod endpoint_detail;
pub mod endpoints;
pub mod event_detail;
pub mod events;
pub mod login;
pub mod not_found;
