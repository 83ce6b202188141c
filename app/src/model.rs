//! Types shared by the server and the browser.

pub use roles::{AccountRole, Permission};
use serde::{Deserialize, Serialize};

/// The shortest password anyone may set: the forms ask for it, the server
/// refuses less.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Who is signed in, as the server resolved it from the session cookie:
/// a user, or a browser a portal link signed into an account. The server
/// puts it into the request's extensions; server functions read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Viewer {
    /// For the audit log: `user:usr_…`, or `portal:lnk_…`.
    pub actor: String,
    /// None for a portal session, which has no user.
    pub user_id: Option<String>,
    pub account_id: String,
    /// An installation admin (never a portal session).
    pub is_admin: bool,
    pub role: AccountRole,
    /// A portal session's way back to the platform, if it gave one.
    pub return_url: Option<String>,
    pub portal: bool,
}

impl Viewer {
    pub fn may(&self, permission: Permission) -> bool {
        // A portal session never manages the team or keys, whatever its role.
        let portal_forbidden =
            matches!(permission, Permission::ManageTeam | Permission::ManageKeys);
        self.role.allows(permission) && !(self.portal && portal_forbidden)
    }
}

/// How the installation names and colours itself (`--brand-name`,
/// `--brand-accent`, a logo file under the site root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Brand {
    pub name: String,
    /// A CSS colour, checked by the server.
    pub accent: Option<String>,
    /// The logo's path under the site root, if there is one.
    pub logo: Option<String>,
}

impl Default for Brand {
    fn default() -> Self {
        Brand {
            name: "Dakghar".into(),
            accent: None,
            logo: None,
        }
    }
}

/// The signed-in viewer as the dashboard shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    /// The user's email; empty for a portal session.
    pub email: String,
    pub account_name: String,
    pub is_admin: bool,
    pub role: AccountRole,
    pub portal: bool,
    /// "Back to …": where a portal session returns, and the host to name.
    pub back: Option<(String, String)>,
    /// What the pages offer; the server checks again on every call.
    pub can_change: bool,
    pub can_see_secrets: bool,
    pub can_manage_team: bool,
    pub can_manage_keys: bool,
}

pub mod account;
pub mod admin;
pub mod endpoints;
pub mod events;
pub mod roles;
pub mod team;
