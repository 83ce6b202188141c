//! The team of an account: its members with their roles, invitations by
//! email (a single-use link valid 72 hours to set a password), role
//! changes and removals. An account always keeps an owner.

use std::time::Duration;

use super::{links, normalize_email};
use crate::{
    auth::password,
    context::Ctx,
    error::{Error, OrNotFound, Result},
    jobs::alerts::texts,
    store::{AccessLink, AccountRole, LinkKind, NewLink, StoreError, TeamChange, User},
};

/// How long an invitation can be accepted.
pub const INVITATION_TTL: Duration = Duration::from_secs(72 * 3600);

/// The members, by email, and the invitations still open.
pub async fn team(ctx: &Ctx, account_id: &str) -> Result<(Vec<User>, Vec<AccessLink>)> {
    let members = ctx.store.account_users(account_id).await?;
    let open = ctx
        .store
        .open_invitations(account_id, ctx.clock.now())
        .await?;
    Ok((members, open))
}

/// An invitation as sent. With SMTP configured only the invitee's inbox
/// gets the link, so accepting it shows they own the address; without,
/// `link` is returned once, for the inviter to pass on.
#[derive(Debug, Clone)]
pub struct Invitation {
    pub email: String,
    pub role: AccountRole,
    pub link: Option<String>,
    pub expires_at: i64,
}

impl Invitation {
    pub fn emailed(&self) -> bool {
        self.link.is_none()
    }
}

/// Invites `email` into the account with `role`, on behalf of `actor`.
pub async fn invite(
    ctx: &Ctx,
    account_id: &str,
    email: &str,
    role: AccountRole,
    actor: &str,
) -> Result<Invitation> {
    let email = normalize_email(email)?;
    match ctx.store.user_by_email(&email).await {
        Ok(_) => {
            return Err(Error::Conflict(
                "a user with this email already exists".into(),
            ))
        }
        Err(StoreError::NotFound) => {}
        Err(e) => return Err(e.into()),
    }
    let account = ctx
        .store
        .account(account_id)
        .await
        .or_not_found("account")?;
    let now = ctx.clock.now();
    let (secret, hash) = links::new_secret();
    let new = NewLink {
        kind: LinkKind::Invitation,
        account_id,
        user_id: None,
        email: Some(&email),
        role: Some(role),
        return_url: None,
        created_by: actor,
        expires_at: now.plus(INVITATION_TTL),
    };
    let link = ctx.store.create_link(&new, &hash, now).await?;
    let url = ctx.public_url(&format!("/invitations/{}", links::token(&link, &secret)));
    let email_text = texts::invitation(
        &ctx.config.brand.name,
        &account.name,
        role.as_str(),
        &url,
        link.expires_at,
    );
    email_text
        .write_to(&ctx.store, account_id, &email, now)
        .await?;
    ctx.mail_now();
    tracing::info!(account = %account_id, actor, role = role.as_str(), "member invited");
    Ok(Invitation {
        email,
        role,
        link: ctx.config.mail.is_none().then_some(url),
        expires_at: link.expires_at,
    })
}

/// Accepts the invitation `token` names with a password of the invitee's
/// choosing; they are a member from then on.
pub async fn accept_invitation(ctx: &Ctx, token: &str, password: String) -> Result<User> {
    let now = ctx.clock.now();
    let link = links::check(&ctx.store, token, LinkKind::Invitation, now).await?;
    let hash = password::hash_off_thread(password).await?;
    let user = match ctx.store.accept_invitation(&link.id, &hash, now).await {
        Ok(user) => user,
        // Used a moment ago by another click.
        Err(StoreError::NotFound) => return Err(Error::NotFound(links::UNUSABLE)),
        Err(e) => return Err(e.into()),
    };
    tracing::info!(user = %user.id, account = %user.account_id, "invitation accepted");
    Ok(user)
}

/// Withdraws an invitation not yet accepted.
pub async fn withdraw_invitation(ctx: &Ctx, account_id: &str, id: &str) -> Result<()> {
    ctx.store
        .withdraw_invitation(account_id, id, ctx.clock.now())
        .await
        .or_not_found("invitation")
}

pub async fn change_role(
    ctx: &Ctx,
    account_id: &str,
    user_id: &str,
    role: AccountRole,
) -> Result<User> {
    match ctx
        .store
        .change_member(account_id, user_id, Some(role))
        .await
        .or_not_found("member")?
    {
        TeamChange::Changed(Some(user)) => Ok(user),
        TeamChange::Changed(None) => Err(Error::NotFound("member")),
        TeamChange::LastOwner => Err(last_owner()),
    }
}

/// Removes the member; their sessions open nothing from then on.
pub async fn remove(ctx: &Ctx, account_id: &str, user_id: &str) -> Result<()> {
    match ctx
        .store
        .change_member(account_id, user_id, None)
        .await
        .or_not_found("member")?
    {
        TeamChange::Changed(_) => {
            tracing::info!(user = %user_id, account = %account_id, "member removed");
            Ok(())
        }
        TeamChange::LastOwner => Err(last_owner()),
    }
}

/// Taking away the last owner would leave nobody to manage the team.
fn last_owner() -> Error {
    Error::Conflict("the account must keep an owner: make another member owner first".into())
}

#[cfg(test)]
mod tests {
    use super::INVITATION_TTL;
    use crate::{accounts::password_reset::RESET_TTL, jobs::expired_links::MAILED_LINK_LIFETIME};

    #[test]
    fn mailed_links_end_before_their_mail_is_forgotten() {
        assert!(INVITATION_TTL <= MAILED_LINK_LIFETIME);
        assert!(RESET_TTL <= MAILED_LINK_LIFETIME);
    }
}
