//! A fresh database per run: a SQLite file in a temporary directory, or a
//! new schema on the Postgres server.

use dakghar::{
    ids,
    store::{postgres, Store},
};

#[derive(Debug, Clone)]
pub enum Backend {
    Sqlite,
    Postgres(String),
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }
}

pub struct BenchDb {
    pub store: Store,
    /// The URL a `dakghar serve` child opens, schema included.
    pub child_url: String,
    schema: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

/// The bench's store and its `dakghar serve` child seal with the same key.
pub const SECRETS_KEY: &str = "YmVuY2ggc2VjcmV0cyBrZXksIDMyIGJ5dGVzIGxvbmc=";

fn secrets_key() -> dakghar::sealing::SecretsKey {
    dakghar::sealing::SecretsKey::from_base64(SECRETS_KEY).unwrap()
}

impl BenchDb {
    pub async fn new(backend: &Backend) -> BenchDb {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("bench.db").display());
                let store = Store::connect(Some(&url))
                    .await
                    .unwrap()
                    .with_secrets_key(secrets_key());
                store.migrate().await.unwrap();
                BenchDb {
                    store,
                    child_url: url,
                    schema: None,
                    _dir: Some(dir),
                }
            }
            Backend::Postgres(url) => {
                let schema = format!("bench_{}", ids::random_token(12).to_lowercase());
                let store = postgres::connect(url, Some(&schema))
                    .await
                    .unwrap()
                    .with_secrets_key(secrets_key());
                store.migrate().await.unwrap();
                let sep = if url.contains('?') { '&' } else { '?' };
                BenchDb {
                    store,
                    child_url: format!("{url}{sep}options[search_path]={schema}"),
                    schema: Some((url.clone(), schema)),
                    _dir: None,
                }
            }
        }
    }

    /// The Postgres server's URL (no schema), for its server-wide views.
    pub fn postgres_url(&self) -> Option<&str> {
        self.schema.as_ref().map(|(url, _)| url.as_str())
    }

    pub async fn finish(self) {
        self.store.close().await;
        if let Some((url, schema)) = self.schema {
            let admin = postgres::connect(&url, None).await.unwrap();
            admin
                .execute_script(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await
                .unwrap();
            admin.close().await;
        }
    }
}
