// `sqlx::migrate!` embeds the migrations at compile time; without this a
// new migration file would not rebuild the binary that must run it.
//
// The Postgres halves of the tests are marked ignored, with the reason,
// when TEST_DATABASE_URL is unset at build time, so a run without
// Postgres says how many did not run instead of passing them silently.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-env-changed=TEST_DATABASE_URL");
    println!("cargo::rustc-check-cfg=cfg(test_postgres)");
    if std::env::var("TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty()) {
        println!("cargo:rustc-cfg=test_postgres");
    }
}
