use leptos::prelude::*;

use crate::{error::AppError, model::Me};

#[server(prefix = "/_fn", endpoint = "me")]
pub async fn get_me() -> Result<Me, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.me(&viewer).await)
}
