//! Types shared by the server and the browser.

use serde::{Deserialize, Serialize};

/// Who is signed in, as the server resolved it from the session cookie.
/// The server puts it into the request's extensions; server functions read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Viewer {
    pub user_id: String,
    pub account_id: String,
    pub is_admin: bool,
}

/// The signed-in user as the dashboard shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub email: String,
    pub account_name: String,
    pub is_admin: bool,
}

pub mod account;
pub mod admin;
pub mod endpoints;
pub mod events;
