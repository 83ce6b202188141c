//! The team page: members, open invitations, and the forms that change
//! them.

use serde::{Deserialize, Serialize};

use super::AccountRole;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    pub id: String,
    pub email: String,
    pub role: AccountRole,
    pub is_admin: bool,
    /// The viewer themself: no removing or demoting oneself here.
    pub is_you: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationView {
    pub id: String,
    pub email: String,
    pub role: AccountRole,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub members: Vec<MemberView>,
    pub invitations: Vec<InvitationView>,
}

/// An invitation as sent: the link is shown once, only when no email can
/// carry it (no SMTP configured).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invited {
    pub email: String,
    pub link: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteForm {
    pub email: String,
    /// `owner`, `developer` or `viewer`.
    pub role: String,
}
