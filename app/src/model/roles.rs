//! Account roles (SPEC §10) and what each may do. The server enforces them
//! on every call; the pages use them only to leave out what would be
//! refused.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AccountRole {
    /// The team, API keys, everything.
    Owner,
    /// Endpoints, secrets, resend.
    Developer,
    /// Reads; no secret, no change.
    Viewer,
}

/// What a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permission {
    /// See events, deliveries, endpoints, health, notifications, the docs.
    Read,
    /// Add, edit, pause, resume and delete endpoints; resend; test events.
    Change,
    /// Reveal and rotate signing secrets.
    SeeSecrets,
    /// Invite members, change their roles, remove them.
    ManageTeam,
    /// Create and revoke API keys.
    ManageKeys,
}

impl AccountRole {
    pub const ALL: [AccountRole; 3] = [
        AccountRole::Owner,
        AccountRole::Developer,
        AccountRole::Viewer,
    ];

    pub fn allows(self, p: Permission) -> bool {
        match self {
            AccountRole::Owner => true,
            AccountRole::Developer => {
                matches!(
                    p,
                    Permission::Read | Permission::Change | Permission::SeeSecrets
                )
            }
            AccountRole::Viewer => p == Permission::Read,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AccountRole::Owner => "owner",
            AccountRole::Developer => "developer",
            AccountRole::Viewer => "viewer",
        }
    }

    pub fn parse(s: &str) -> Option<AccountRole> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}
