//! Server functions of the team page: owners only, checked on the server.

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::team::{InviteForm, Invited, Team},
};

#[server(prefix = "/_fn", endpoint = "team")]
pub async fn get_team() -> Result<Team, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.team(&viewer).await)
}

#[server(prefix = "/_fn", endpoint = "team_invite")]
pub async fn invite(form: InviteForm) -> Result<Invited, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.invite(&viewer, form).await)
}

#[server(prefix = "/_fn", endpoint = "team_role")]
pub async fn change_role(user_id: String, role: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.change_role(&viewer, &user_id, &role).await)
}

#[server(prefix = "/_fn", endpoint = "team_remove")]
pub async fn remove_member(user_id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.remove_member(&viewer, &user_id).await)
}

#[server(prefix = "/_fn", endpoint = "team_withdraw")]
pub async fn withdraw_invitation(id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.withdraw_invitation(&viewer, &id).await)
}
