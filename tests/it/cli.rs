//! The real binary: commands, environment variables and one-line errors.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_dakghar");

fn dakghar(db: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", db)
        .env("RUST_LOG", "off")
        .output()
        .expect("run dakghar")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

/// A failure is one clear line, never a panic with a backtrace.
fn assert_one_line_error(o: &Output, expect: &str) {
    assert!(!o.status.success(), "should fail: {o:?}");
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("error: ") && err.contains(expect), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn temp_db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cli.db").display());
    (dir, url)
}

#[test]
fn accounts_users_and_api_keys_are_created_from_the_command_line() {
    let (_dir, db) = temp_db();

    let out = dakghar(&db, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let out = dakghar(&db, &["account", "create", "--name", "acme"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("acc_"),
        "prints only the id: {}",
        stdout(&out)
    );

    let dup = dakghar(&db, &["account", "create", "--name", "acme"]);
    assert_one_line_error(&dup, "already exists");

    // The password comes from standard input.
    let mut child = Command::new(BIN)
        .args([
            "user",
            "create",
            "--email",
            "Ana@Acme.example",
            "--account",
            "acme",
            "--admin",
        ])
        .env("DAKGHAR_DATABASE_URL", &db)
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a long enough password\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("usr_"));

    let out = dakghar(
        &db,
        &[
            "user",
            "create",
            "--email",
            "bo@acme.example",
            "--account",
            "acme",
            "--password",
            "short",
        ],
    );
    assert_one_line_error(&out, "at least 8 characters");
    let out = dakghar(
        &db,
        &[
            "user",
            "create",
            "--email",
            "bo@acme.example",
            "--account",
            "nope",
            "--password",
            "long enough pw",
        ],
    );
    assert_one_line_error(&out, "no account named \"nope\"");
    let out = dakghar(
        &db,
        &[
            "user",
            "create",
            "--email",
            "not-an-email",
            "--account",
            "acme",
            "--password",
            "long enough pw",
        ],
    );
    assert_one_line_error(&out, "is not an email address");

    let out = dakghar(&db, &["api-key", "create", "--account", "acme"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let key = stdout(&out);
    assert!(
        key.starts_with("dk_") && key.len() == 35 && !key.contains('\n'),
        "only the key: {key}"
    );

    // Every flag also reads DAKGHAR_<FLAG>.
    let out = Command::new(BIN)
        .args(["account", "create"])
        .env("DAKGHAR_DATABASE_URL", &db)
        .env("DAKGHAR_NAME", "from-env")
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = dakghar(&db, &["account", "create", "--name", "from-env"]);
    assert_one_line_error(&out, "already exists");
}

#[test]
fn bad_flags_unknown_schemes_and_unreachable_databases_fail_in_one_line() {
    let (_dir, db) = temp_db();

    let out = dakghar(&db, &["serve", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: unexpected argument '--no-such-flag'"),
        "{err}"
    );
    assert!(!err.contains("panicked"));

    for (flag, value, says) in [
        ("--retry-statuses", "5x", "not a status"),
        ("--retry-strategy", "sometimes", "invalid value"),
        ("--default-rate-limit", "0", "or unlimited"),
        ("--max-in-flight-per-host", "lots", "or unlimited"),
        ("--ingest-rate-limit", "fast", "or unlimited"),
        ("--max-endpoints-per-account", "0", "0"),
        ("--egress-proxy", "ftp://proxy", "http://"),
        ("--metrics-listen", "nowhere", "invalid"),
    ] {
        let out = dakghar(&db, &["serve", flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = stderr(&out);
        assert!(
            err.contains(flag) && err.contains(says),
            "{flag} {value}: {err}"
        );
    }

    let out = dakghar("mysql://root@127.0.0.1/x", &["migrate"]);
    assert_one_line_error(&out, "unsupported database URL scheme 'mysql'");

    // Nothing listens on port 1; the password must not be echoed back.
    let out = dakghar("postgres://postgres:hunter2@127.0.0.1:1/test", &["migrate"]);
    assert_one_line_error(
        &out,
        "cannot connect to the database at postgres://postgres:****@127.0.0.1:1/test",
    );
    assert!(!stderr(&out).contains("hunter2"));

    let out = dakghar("sqlite:///proc/definitely/not/here.db", &["migrate"]);
    assert_one_line_error(&out, "cannot");
}

#[test]
fn the_first_start_prints_an_admin_login_once() {
    let (dir, db) = temp_db();
    let serve = |db: &str| {
        Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("DAKGHAR_DATABASE_URL", db)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // Reads stderr until the server says it is serving, then stops it.
    let run_once = |db: &str| -> String {
        let mut child = serve(db);
        let stderr = child.stderr.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap();
            if line.contains("is serving") || Instant::now() > deadline {
                break;
            }
        }
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };

    let first = run_once(&db);
    assert!(first.contains("email:    admin@localhost"), "{first}");
    let password = first
        .lines()
        .find_map(|l| l.trim().strip_prefix("password: "))
        .expect("a printed password")
        .trim()
        .to_string();
    assert!(password.len() >= 20);

    let second = run_once(&db);
    assert!(!second.contains("password"), "shown only once: {second}");
    drop(dir);
}

#[test]
fn operators_make_platform_keys_reset_passwords_and_delete_users() {
    let (_dir, db) = temp_db();
    assert!(dakghar(&db, &["account", "create", "--name", "acme"])
        .status
        .success());

    let out = dakghar(&db, &["api-key", "create", "--platform"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let key = stdout(&out);
    assert!(
        key.starts_with("dkp_") && !key.contains('\n'),
        "only the key: {key}"
    );
    let both = dakghar(
        &db,
        &["api-key", "create", "--platform", "--account", "acme"],
    );
    assert_eq!(
        both.status.code(),
        Some(2),
        "a platform key belongs to no account"
    );
    let neither = dakghar(&db, &["api-key", "create"]);
    assert_eq!(neither.status.code(), Some(2));

    let create = [
        "user",
        "create",
        "--email",
        "ana@acme.example",
        "--account",
        "acme",
        "--password",
        "first password",
    ];
    assert!(dakghar(&db, &create).status.success());
    let out = dakghar(
        &db,
        &[
            "user",
            "reset-password",
            "--email",
            "Ana@Acme.example",
            "--password",
            "second password",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("usr_"));
    let short = dakghar(
        &db,
        &[
            "user",
            "reset-password",
            "--email",
            "ana@acme.example",
            "--password",
            "short",
        ],
    );
    assert_one_line_error(&short, "at least 8 characters");
    let nobody = dakghar(
        &db,
        &[
            "user",
            "reset-password",
            "--email",
            "bob@acme.example",
            "--password",
            "long enough",
        ],
    );
    assert_one_line_error(&nobody, "no user with the email \"bob@acme.example\"");

    let out = dakghar(&db, &["user", "delete", "--email", "ana@acme.example"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let again = dakghar(&db, &["user", "delete", "--email", "ana@acme.example"]);
    assert_one_line_error(&again, "no user with the email");
}
