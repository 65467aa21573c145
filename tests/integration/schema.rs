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
