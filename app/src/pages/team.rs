//! The team: who may see and change the account, and in what role;
//! invitations by email. Owners only (the server checks every call).

use leptos::prelude::*;
use leptos_meta::Title;

use crate::{
    api::team::{get_team, ChangeRole, Invite, RemoveMember, WithdrawInvitation},
    components::{
        copy_button::CopyButton,
        layout::{ErrorNotice, Layout},
        time::Time,
    },
    model::AccountRole,
};

fn role_options(selected: AccountRole) -> impl IntoView {
    AccountRole::ALL
        .into_iter()
        .map(|r| {
            view! {
                <option value=r.as_str() selected=r == selected>
                    {r.as_str()}
                </option>
            }
        })
        .collect_view()
}

#[component]
pub fn TeamPage() -> impl IntoView {
    let invite = ServerAction::<Invite>::new();
    let change = ServerAction::<ChangeRole>::new();
    let remove = ServerAction::<RemoveMember>::new();
    let withdraw = ServerAction::<WithdrawInvitation>::new();
    let team = Resource::new(
        move || {
            (
                invite.version().get(),
                change.version().get(),
                remove.version().get(),
                withdraw.version().get(),
            )
        },
        |_| get_team(),
    );
    let invited = move || {
        match invite.value().get() {
        Some(Ok(i)) => Some(
            view! {
                <div class="notice ok" data-testid="invited">
                    {match i.link {
                        None => view! {
                            <p>{format!("Invitation sent to {}. Their link works once, for 72 hours.", i.email)}</p>
                        }
                        .into_any(),
                        Some(link) => view! {
                            <p>{format!("No email is configured: pass this link on to {} yourself. It works once, for 72 hours.", i.email)}</p>
                            <code class="secret" data-testid="invitation-link">{link.clone()}</code>
                            <CopyButton text=link label="Copy link" />
                        }
                        .into_any(),
                    }}
                </div>
            }
            .into_any(),
        ),
        Some(Err(e)) => Some(view! { <ErrorNotice error=e /> }.into_any()),
        None => None,
    }
    };
    let failed = move || {
        [
            change.value().get(),
            remove.value().get(),
            withdraw.value().get(),
        ]
        .into_iter()
        .flatten()
        .find_map(Result::err)
        .map(|e| view! { <ErrorNotice error=e /> })
    };
    view! {
        <Title text="Team" />
        <Layout>
            <div class="page-head">
                <h1>"Team"</h1>
            </div>
            {invited}
            {failed}
            <section class="card">
                <h2>"Invite a member"</h2>
                <ActionForm action=invite attr:class="form-grid">
                    <label for="invite-email">"Email"</label>
                    <input id="invite-email" name="form[email]" type="email" required />
                    <label for="invite-role">"Role"</label>
                    <select id="invite-role" name="form[role]">
                        {role_options(AccountRole::Developer)}
                    </select>
                    <div class="form-actions">
                        <button type="submit" class="button primary">"Send invitation"</button>
                    </div>
                </ActionForm>
                <p class="muted small">
                    "Owners manage the team and API keys; developers change endpoints, see secrets and resend; viewers read."
                </p>
            </section>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match team.await {
                        Ok(team) => view! {
                            <table class="table" data-testid="members-table">
                                <thead>
                                    <tr><th>"Member"</th><th>"Role"</th><th></th></tr>
                                </thead>
                                <tbody>
                                    {team.members.into_iter().map(|m| {
                                        let (id_role, id_remove) = (m.id.clone(), m.id.clone());
                                        let label = format!("Role of {}", m.email);
                                        view! {
                                            <tr data-testid="member-row">
                                                <td data-label="Member">{m.email.clone()} {m.is_admin.then(|| view! { <span class="badge info">"admin"</span> })}</td>
                                                <td data-label="Role">
                                                    <ActionForm action=change attr:class="inline">
                                                        <input type="hidden" name="user_id" value=id_role />
                                                        <select name="role" aria-label=label>{role_options(m.role)}</select>
                                                        <button type="submit" class="button secondary small">"Change"</button>
                                                    </ActionForm>
                                                </td>
                                                <td data-label="">
                                                    {(!m.is_you).then(|| view! {
                                                        <ActionForm action=remove>
                                                            <input type="hidden" name="user_id" value=id_remove />
                                                            <button type="submit" class="button danger small">"Remove"</button>
                                                        </ActionForm>
                                                    })}
                                                </td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                            {(!team.invitations.is_empty()).then(|| view! {
                                <h2>"Open invitations"</h2>
                                <table class="table" data-testid="invitations-table">
                                    <thead><tr><th>"Email"</th><th>"Role"</th><th>"Expires"</th><th></th></tr></thead>
                                    <tbody>
                                        {team.invitations.into_iter().map(|i| view! {
                                            <tr data-testid="invitation-row">
                                                <td data-label="Email">{i.email}</td>
                                                <td data-label="Role">{i.role.as_str()}</td>
                                                <td class="time" data-label="Expires"><Time ms=i.expires_at /></td>
                                                <td>
                                                    <ActionForm action=withdraw>
                                                        <input type="hidden" name="id" value=i.id />
                                                        <button type="submit" class="button secondary small">"Withdraw"</button>
                                                    </ActionForm>
                                                </td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            })}
                        }
                        .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}
