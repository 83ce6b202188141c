//! The team page's data and actions, for the viewer's account.

use app::{
    error::AppError,
    model::{
        team::{InvitationView, InviteForm, Invited, MemberView, Team},
        AccountRole, Viewer,
    },
};

use super::app_role;
use crate::{accounts::team, context::Ctx, store};

fn store_role(role: AccountRole) -> store::AccountRole {
    match role {
        AccountRole::Owner => store::AccountRole::Owner,
        AccountRole::Developer => store::AccountRole::Developer,
        AccountRole::Viewer => store::AccountRole::Viewer,
    }
}

fn role(raw: &str) -> Result<store::AccountRole, AppError> {
    AccountRole::parse(raw.trim())
        .map(store_role)
        .ok_or_else(|| AppError::Invalid("choose a role: owner, developer or viewer".into()))
}

pub async fn team(ctx: &Ctx, viewer: &Viewer) -> Result<Team, AppError> {
    let (members, invitations) = team::team(ctx, &viewer.account_id).await?;
    Ok(Team {
        members: members
            .into_iter()
            .map(|u| MemberView {
                is_you: viewer.user_id.as_deref() == Some(u.id.as_str()),
                is_admin: u.is_admin(),
                role: app_role(u.account_role),
                id: u.id,
                email: u.email,
            })
            .collect(),
        invitations: invitations
            .into_iter()
            .map(|l| InvitationView {
                role: l
                    .role
                    .as_deref()
                    .and_then(AccountRole::parse)
                    .unwrap_or(AccountRole::Viewer),
                email: l.email.unwrap_or_default(),
                expires_at: l.expires_at,
                id: l.id,
            })
            .collect(),
    })
}

pub async fn invite(ctx: &Ctx, viewer: &Viewer, form: InviteForm) -> Result<Invited, AppError> {
    let invited = team::invite(
        ctx,
        &viewer.account_id,
        &form.email,
        role(&form.role)?,
        &viewer.actor,
    )
    .await?;
    Ok(Invited {
        email: invited.email,
        link: invited.link,
    })
}

pub async fn change_role(
    ctx: &Ctx,
    viewer: &Viewer,
    user_id: &str,
    new_role: &str,
) -> Result<(), AppError> {
    team::change_role(ctx, &viewer.account_id, user_id, role(new_role)?).await?;
    Ok(())
}

pub async fn remove(ctx: &Ctx, viewer: &Viewer, user_id: &str) -> Result<(), AppError> {
    Ok(team::remove(ctx, &viewer.account_id, user_id).await?)
}

pub async fn withdraw(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    Ok(team::withdraw_invitation(ctx, &viewer.account_id, id).await?)
}
