//! `schema.graphql` is generated: it must equal `sessiond schema`. Run with
//! `UPDATE_SCHEMA=1` to rewrite it after a deliberate change.

#[test]
fn checked_in_schema_matches_the_code() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema.graphql");
    let generated = sessiond::graphql::sdl();
    if std::env::var("UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write schema.graphql");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "schema.graphql differs from `sessiond schema`; regenerate it with `cargo run -- schema > schema.graphql` \
         (or UPDATE_SCHEMA=1 cargo test) and review the change"
    );
}

#[test]
fn the_binary_prints_the_same_schema() {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_sessiond")).arg("schema").output().expect("run sessiond schema");
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).expect("utf8"), sessiond::graphql::sdl());
}

/// `docs/declarations.txt` is `sessiond apply --explain`: README points to it as the
/// reference of every key. Run with `UPDATE_SCHEMA=1` to rewrite it too.
#[test]
fn the_declaration_reference_is_what_apply_explains() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/declarations.txt");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["apply", "--explain"])
        .output()
        .expect("run sessiond apply --explain");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let generated = String::from_utf8(out.stdout).expect("utf8");
    assert_eq!(generated, sessiond::domain::directory::apply::keys::explain());
    if std::env::var("UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write docs/declarations.txt");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/declarations.txt differs from `sessiond apply --explain`; regenerate it with \
         `cargo run -- apply --explain > docs/declarations.txt` and review the change"
    );
}
