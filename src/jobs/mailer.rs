//! Sends the notification outbox by SMTP when it is configured; without
//! it, notifications stay in the outbox and show in the dashboard. A failed
//! send is retried with backoff; the outbox row records why.

use std::time::Duration;

use lettre::{
    message::{header::ContentType, Mailbox},
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};
use tokio_util::sync::CancellationToken;

use crate::{
    clock::{SharedClock, Timestamp},
    store::{Notification, Store, StoreError},
};

#[derive(Debug, Clone)]
pub struct MailSettings {
    /// `smtp://host:port` (plain, for a local relay), `smtp://…?tls=required`
    /// (STARTTLS) or `smtps://user:password@host:465`.
    pub smtp_url: String,
    pub from: String,
    pub every: Duration,
    /// Gets a copy (Bcc) of every alert to an account: the platform's
    /// support team sees what its customers are told.
    pub support: Option<String>,
}

pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    support: Option<Mailbox>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub sent: usize,
    pub failed: usize,
}

impl Mailer {
    /// Errors name the problem without repeating the URL (it may hold a password).
    pub fn new(settings: &MailSettings) -> Result<Mailer, String> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(&settings.smtp_url)
            .map_err(|e| format!("invalid --smtp-url: {e}"))?
            .timeout(Some(Duration::from_secs(20)))
            .build();
        let from = settings
            .from
            .parse()
            .map_err(|e| format!("invalid --smtp-from {:?}: {e}", settings.from))?;
        let support = settings
            .support
            .as_deref()
            .map(|s| {
                s.parse()
                    .map_err(|e| format!("invalid --support-email {s:?}: {e}"))
            })
            .transpose()?;
        Ok(Mailer {
            transport,
            from,
            support,
        })
    }

    /// Sends what is due; each notification to every user of its account.
    pub async fn send_due(&self, store: &Store, now: Timestamp) -> Result<Sent, StoreError> {
        let mut out = Sent::default();
        for n in store.due_notifications(now, 50).await? {
            // Longer than one send may take; if this node dies, another retries after it.
            if !store
                .claim_notification(&n.id, now, Timestamp(now.millis() + 120_000))
                .await?
            {
                continue;
            }
            match self.send_one(store, &n).await {
                Ok(()) => {
                    store.mark_sent(&n.id, now).await?;
                    out.sent += 1;
                }
                Err(reason) => {
                    let wait_min = 1i64 << n.send_attempts.clamp(0, 6);
                    let retry_at = Timestamp(now.millis() + wait_min.min(60) * 60_000);
                    tracing::warn!(notification = %n.id, error = %reason, "alert email not sent; will retry");
                    store.mark_send_failed(&n.id, &reason, retry_at).await?;
                    out.failed += 1;
                }
            }
        }
        Ok(out)
    }

    async fn send_one(&self, store: &Store, n: &Notification) -> Result<(), String> {
        let emails = match &n.recipient {
            Some(one) => vec![one.clone()],
            None => store
                .account_emails(&n.account_id)
                .await
                .map_err(|e| e.to_string())?,
        };
        let mut message = Message::builder()
            .from(self.from.clone())
            .subject(n.subject.clone())
            .header(ContentType::TEXT_PLAIN);
        let mut recipients = 0;
        for email in emails {
            // One unusable address must not keep the others from their alerts.
            match email.parse::<Mailbox>() {
                Ok(to) => {
                    message = message.to(to);
                    recipients += 1;
                }
                Err(e) => {
                    tracing::warn!(notification = %n.id, error = %e, "skipping an address that cannot receive email")
                }
            }
        }
        if recipients == 0 {
            return Err("no user of the account has a usable email address".into());
        }
        // Alerts only: a personal email (an invitation, a reset link) is
        // for its one reader.
        if let (Some(support), None) = (&self.support, &n.recipient) {
            message = message.bcc(support.clone());
        }
        let message = message.body(n.body.clone()).map_err(|e| e.to_string())?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Sends the outbox every `every`, and when woken, until `shutdown`.
pub fn spawn(
    mailer: Mailer,
    store: Store,
    clock: SharedClock,
    every: Duration,
    wake: std::sync::Arc<tokio::sync::Notify>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let mailer = std::sync::Arc::new(mailer);
    super::every_or_woken(every, Some(wake), shutdown, move || {
        let (mailer, store, clock) = (mailer.clone(), store.clone(), clock.clone());
        async move {
            if let Err(e) = mailer.send_due(&store, clock.now()).await {
                tracing::error!(error = %e, "reading the outbox failed; will try again");
            }
        }
    })
}
