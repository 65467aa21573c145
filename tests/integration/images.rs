//! Images pulled from a real registry (Debian's `docker-registry`, with htpasswd auth) into
//! a machine's store: layers, whiteouts, config, digests, auth, platforms, one fetch per
//! blob, progress, the warm cache. No database: the store is the machine's.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use sessiond::domain::runtime::image::pull::{Options, Pulled, pull};
use sessiond::domain::runtime::image::registry::{self, Target};
use sessiond::domain::runtime::image::store::Store;
use sessiond::domain::runtime::image::{Progress, PullError};

use crate::support::registry::{Compression, Entry, PASSWORD, Registry, USER, registry, tar};

/// The registry as a site declares it: its password in a file.
fn declared(r: &Registry, dir: &Path, with_credentials: bool) -> BTreeMap<String, registry::Registry> {
    let password = dir.join("registry.password");
    std::fs::write(&password, format!("{PASSWORD}\n")).expect("password file");
    let mut reg = registry::Registry { url: format!("http://{}", r.host), insecure: true, ..Default::default() };
    if with_credentials {
        reg.username = Some(USER.into());
        reg.password_file = Some(password);
    }
    reg.validate().expect("a valid declaration");
    BTreeMap::from([("test".to_owned(), reg)])
}

fn options() -> Options {
    Options { backoff: Duration::from_millis(20), ..Options::default() }
}

async fn pull_recording(
    store: &Store,
    target: &Target,
    options: &Options,
) -> (Result<Pulled, PullError>, Vec<Progress>) {
    let mut seen = Vec::new();
    let result = pull(store, target, options, &mut |p| seen.push(p)).await;
    (result, seen)
}

fn roots(store: &Store) -> usize {
    std::fs::read_dir(store.dir().join("roots")).expect("roots").count()
}

#[tokio::test]
async fn three_layers_stack_with_whiteouts_config_and_progress() {
    let Some(r) = registry() else { return };
    let base = tar(&[
        Entry::Dir("etc"),
        Entry::File("etc/os-release", b"NAME=base\n", 0o644),
        Entry::File("etc/removed", b"gone soon", 0o644),
        Entry::Dir("opt/tool"),
        Entry::File("opt/tool/old", b"old", 0o644),
        Entry::File("usr/bin/su", b"#!/bin/sh\n", 0o4755),
    ]);
    let middle = tar(&[
        Entry::File("etc/.wh.removed", b"", 0o644),
        Entry::File("opt/tool/.wh..wh..opq", b"", 0o644),
        Entry::File("opt/tool/new", b"new", 0o644),
        Entry::Symlink("escape", "../../../../../../../../tmp"),
    ]);
    let top = tar(&[Entry::File("etc/os-release", b"NAME=top\n", 0o644), Entry::Dir("work")]);
    let pushed = r
        .push_image(
            "stack/three",
            "1",
            &[base, middle, top],
            Compression::Gzip,
            json!({"Env": ["PATH=/usr/bin:/bin", "GREETING=hello=world"], "WorkingDir": "/work", "Cmd": ["sh"], "User": "1000"}),
            "amd64",
        )
        .await;
    let dir = tempfile::tempdir().expect("a runtime directory");
    let store = Store::open(dir.path()).expect("a store");
    let target = registry::resolve("test/stack/three:1", &declared(r, dir.path(), true)).expect("a target");
    let (pulled, seen) = pull_recording(&store, &target, &options()).await;
    let pulled = pulled.expect("pulled");
    assert!(pulled.fetched);
    let root = &pulled.image.root;
    assert_eq!(std::fs::read(root.join("etc/os-release")).expect("the top layer's file"), b"NAME=top\n");
    assert!(!root.join("etc/removed").exists(), "a whiteout hides the file below");
    assert!(!root.join("opt/tool/old").exists(), "an opaque directory hides what was below");
    assert_eq!(std::fs::read(root.join("opt/tool/new")).expect("the opaque directory's own file"), b"new");
    use std::os::unix::fs::PermissionsExt;
    let su = std::fs::metadata(root.join("usr/bin/su")).expect("su").permissions().mode();
    assert_eq!(su & 0o7000, 0, "no setuid: {su:o}");
    assert!(std::fs::symlink_metadata(root.join("escape")).expect("the link").file_type().is_symlink());
    let config = &pulled.image.record.config;
    assert_eq!(
        config.env,
        vec![("PATH".into(), "/usr/bin:/bin".into()), ("GREETING".into(), "hello=world".into())],
        "Env, split at the first ="
    );
    assert_eq!((config.working_dir.as_deref(), config.user.as_deref()), (Some("/work"), Some("1000")));
    assert_eq!(pulled.image.record.digest, pushed.manifest, "the tag resolved to the manifest's digest");

    // Progress: never backwards, ending at every byte and layer.
    let last = *seen.last().expect("progress");
    assert!(seen.windows(2).all(|w| w[1].bytes_done >= w[0].bytes_done && w[1].layers_done >= w[0].layers_done));
    assert_eq!(
        (last.bytes_done, last.bytes_total, last.layers_done, last.layers_total),
        (pushed.bytes, pushed.bytes, 3, 3)
    );

    // A warm cache: nothing fetched, the registry not asked (its log shows no new request).
    let requests = std::fs::read_to_string(r.dir.join("log")).expect("log").lines().count();
    let (again, seen) = pull_recording(&store, &target, &options()).await;
    let again = again.expect("pulled again");
    assert!(!again.fetched && seen.is_empty());
    assert_eq!(again.image.root, pulled.image.root);
    let after = std::fs::read_to_string(r.dir.join("log")).expect("log").lines().count();
    assert_eq!(after, requests, "a tag pulled here before needs no registry");
    // By digest too, in another reference's words.
    let by_digest =
        registry::resolve(&format!("{}/stack/three@{}", r.host, pushed.manifest), &declared(r, dir.path(), true))
            .expect("a target");
    assert!(!pull_recording(&store, &by_digest, &options()).await.0.expect("pulled").fetched);
    // Asked for the tag's newest, the registry answers with the same digest: nothing fetched again.
    let refresh = Options { refresh: true, ..options() };
    let (newest, _) = pull_recording(&store, &target, &refresh).await;
    assert!(!newest.expect("pulled").fetched);
    for blob in [&pushed.config].into_iter().chain(&pushed.layers) {
        assert_eq!(r.blob_gets(blob), 1, "{blob} fetched once");
    }
}

#[tokio::test]
async fn zstd_and_uncompressed_layers() {
    let Some(r) = registry() else { return };
    let dir = tempfile::tempdir().expect("a runtime directory");
    let store = Store::open(dir.path()).expect("a store");
    let registries = declared(r, dir.path(), true);
    for (repo, how) in [("kinds/zstd", Compression::Zstd), ("kinds/plain", Compression::None)] {
        r.push_image(repo, "1", &[tar(&[Entry::File("hello", repo.as_bytes(), 0o644)])], how, json!({}), "amd64").await;
        let target = registry::resolve(&format!("test/{repo}:1"), &registries).expect("a target");
        let pulled = pull_recording(&store, &target, &options()).await.0.expect("pulled");
        assert_eq!(std::fs::read(pulled.image.root.join("hello")).expect("the file"), repo.as_bytes());
    }
}

/// A Docker schema-2 image (Docker's media types, as `docker push` writes them) is pulled
/// as an OCI one.
#[tokio::test]
async fn a_docker_schema_2_image_is_pulled_too() {
    let Some(r) = registry() else { return };
    let layer = tar(&[Entry::File("from-docker", b"schema 2", 0o644)]);
    let (blob, _) = crate::support::registry::compress(&layer, Compression::Gzip);
    let layer_digest = r.push_blob("docker/two", &blob).await;
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "config": {"Env": ["FROM=docker"]},
        "rootfs": {"type": "layers", "diff_ids": [crate::support::registry::digest(&layer)]},
    }))
    .expect("a config");
    let config_digest = r.push_blob("docker/two", &config).await;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": config.len(), "digest": config_digest},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": blob.len(), "digest": layer_digest}],
    }))
    .expect("a manifest");
    r.push_manifest("docker/two", "1", "application/vnd.docker.distribution.manifest.v2+json", &manifest).await;
    let dir = tempfile::tempdir().expect("a runtime directory");
    let store = Store::open(dir.path()).expect("a store");
    let target = registry::resolve("test/docker/two:1", &declared(r, dir.path(), true)).expect("a target");
    let pulled = pull_recording(&store, &target, &options()).await.0.expect("pulled");
    assert_eq!(std::fs::read(pulled.image.root.join("from-docker")).expect("the file"), b"schema 2");
    assert_eq!(pulled.image.record.config.env, vec![("FROM".to_owned(), "docker".to_owned())]);
}

#[tokio::test]
async fn a_tampered_blob_and_no_credentials_fail_and_leave_nothing() {
    let Some(r) = registry() else { return };
    let layer = tar(&[Entry::File("data", &[b'x'; 4096], 0o644)]);
    let pushed = r.push_image("fail/tampered", "1", &[layer], Compression::None, json!({}), "amd64").await;
    // The registry serves what its disk holds: one byte changed, the same length.
    let file = r.blob_file(&pushed.layers[0]);
    let mut bytes = std::fs::read(&file).expect("the stored blob");
    bytes[600] ^= 1;
    std::fs::write(&file, bytes).expect("tampered");

    let dir = tempfile::tempdir().expect("a runtime directory");
    let store = Store::open(dir.path()).expect("a store");
    let target = registry::resolve("test/fail/tampered:1", &declared(r, dir.path(), true)).expect("a target");
    let err = pull_recording(&store, &target, &options()).await.0.expect_err("refused");
    assert!(matches!(err, PullError::DigestMismatch { .. }), "{err}");
    assert!(err.to_string().starts_with("digest mismatch"), "{err}");
    assert!(!store.has_blob(&pushed.layers[0]), "a blob that does not match is not kept");
    assert_eq!(roots(&store), 0, "no root");
    assert_eq!(std::fs::read_dir(store.dir().join("tmp")).expect("tmp").count(), 0, "no partial file");

    let anonymous = registry::resolve("test/fail/tampered:1", &declared(r, dir.path(), false)).expect("a target");
    let err = pull_recording(&store, &anonymous, &options()).await.0.expect_err("refused");
    assert!(matches!(err, PullError::Unauthorized(_)), "{err}");
    assert!(!err.to_string().contains(PASSWORD));
    assert_eq!(roots(&store), 0);

    let missing = registry::resolve("test/fail/none:1", &declared(r, dir.path(), true)).expect("a target");
    let err = pull_recording(&store, &missing, &options()).await.0.expect_err("refused");
    assert!(matches!(err, PullError::NotFound(_)), "{err}");
    assert!(err.to_string().contains("test/fail/none") || err.to_string().contains("fail/none"), "{err}");

    // Nobody listening: tried again with backoff, then unreachable.
    let closed = registry::Registry {
        url: format!("http://127.0.0.1:{}", crate::support::binary::free_port()),
        insecure: true,
        ..Default::default()
    };
    let target = registry::resolve("gone/x:1", &BTreeMap::from([("gone".to_owned(), closed)])).expect("a target");
    let err = pull_recording(&store, &target, &Options { attempts: 3, ..options() }).await.0.expect_err("refused");
    assert!(matches!(err, PullError::Unreachable(_)), "{err}");
}

/// A registry behind bearer-token auth (Docker Hub's, Harbor's kind): the test user's
/// credentials get a token from its token service, a site's static token (`token_file`) is
/// taken as it is; a wrong password and no credentials are "unauthorized", and nothing of
/// a credential shows in the error.
#[tokio::test]
async fn bearer_tokens_from_a_token_service_and_a_token_file() {
    use crate::support::registry::{STATIC_TOKEN, token_gateway};
    let Some(r) = registry() else { return };
    let layer = tar(&[Entry::File("etc/motd", b"behind a token", 0o644)]);
    let pushed = r.push_image("bearer/motd", "1", &[layer], Compression::Gzip, json!({}), "amd64").await;
    let gateway = token_gateway(r).await;
    let dir = tempfile::tempdir().expect("a directory");
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{text}\n")).expect("a secret file");
        path
    };
    let hub = |username: Option<&str>, password_file: Option<std::path::PathBuf>, token_file| {
        let reg = registry::Registry {
            url: format!("http://{}", gateway.host),
            insecure: true,
            username: username.map(str::to_owned),
            password_file,
            token_file,
        };
        reg.validate().expect("a valid declaration");
        registry::resolve("hub/bearer/motd:1", &BTreeMap::from([("hub".to_owned(), reg)])).expect("a target")
    };
    let pull_into = |target: Target| async move {
        let runtime = tempfile::tempdir().expect("a runtime directory");
        let store = Store::open(runtime.path()).expect("a store");
        let result = pull_recording(&store, &target, &options()).await.0;
        (result, roots(&store))
    };

    let (pulled, _) = pull_into(hub(Some(USER), Some(file("password", PASSWORD)), None)).await;
    let pulled = pulled.expect("pulled with a token of the token service");
    assert_eq!(pulled.image.record.digest, pushed.manifest);
    assert!(!gateway.issued.lock().expect("tokens").is_empty(), "the token service issued the token used");

    let before = gateway.issued.lock().expect("tokens").len();
    let (pulled, _) = pull_into(hub(None, None, Some(file("token", STATIC_TOKEN)))).await;
    assert_eq!(pulled.expect("pulled with the site's token").image.record.digest, pushed.manifest);
    assert_eq!(gateway.issued.lock().expect("tokens").len(), before, "a static token asks the service nothing");

    let (refused, left) = pull_into(hub(Some(USER), Some(file("wrong", "not-the-password")), None)).await;
    let e = refused.expect_err("a wrong password");
    assert!(matches!(e, PullError::Unauthorized(_)), "{e}");
    assert!(!e.to_string().contains("not-the-password"), "{e}");
    assert_eq!(left, 0);
    let (refused, _) = pull_into(hub(None, None, None)).await;
    assert!(matches!(refused, Err(PullError::Unauthorized(_))), "{refused:?}");
}

#[tokio::test]
async fn an_index_picks_this_platform() {
    let Some(r) = registry() else { return };
    let mine = r
        .push_image(
            "multi/arch",
            "amd64",
            &[tar(&[Entry::File("arch", b"amd64", 0o644)])],
            Compression::Gzip,
            json!({}),
            "amd64",
        )
        .await;
    let other = r
        .push_image(
            "multi/arch",
            "arm64",
            &[tar(&[Entry::File("arch", b"arm64", 0o644)])],
            Compression::Gzip,
            json!({}),
            "arm64",
        )
        .await;
    let size = |d: &str| {
        let hex = d.trim_start_matches("sha256:");
        std::fs::metadata(r.dir.join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data"))
            .expect("stored")
            .len()
    };
    let (arch, os) = (sessiond::domain::runtime::image::platform(), "linux");
    let this = arch.trim_start_matches("linux/").to_owned();
    let (first, second) = if this == "arm64" { (&mine, &other) } else { (&other, &mine) };
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": first.manifest, "size": size(&first.manifest),
             "platform": {"architecture": if this == "arm64" { "amd64" } else { "arm64" }, "os": os}},
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": second.manifest, "size": size(&second.manifest),
             "platform": {"architecture": this, "os": os}},
        ],
    }))
    .expect("an index");
    r.push_manifest("multi/arch", "latest", "application/vnd.oci.image.index.v1+json", &index).await;
    let dir = tempfile::tempdir().expect("a runtime directory");
    let store = Store::open(dir.path()).expect("a store");
    let target = registry::resolve("test/multi/arch:latest", &declared(r, dir.path(), true)).expect("a target");
    let pulled = pull_recording(&store, &target, &options()).await.0.expect("pulled");
    assert_eq!(std::fs::read(pulled.image.root.join("arch")).expect("the file"), this.as_bytes());
    assert_eq!(pulled.image.record.digest, second.manifest, "the digest of what ran: this platform's manifest");
}

#[tokio::test]
async fn two_pulls_at_once_fetch_each_blob_once() {
    let Some(r) = registry() else { return };
    let layers: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let data: Vec<u8> =
                (0..200_000_u32).map(|n| (n.wrapping_mul(2_654_435_761).wrapping_add(i) >> 13) as u8).collect();
            tar(&[Entry::File(&format!("layer{i}"), &data, 0o644)])
        })
        .collect();
    let pushed = r.push_image("together/once", "1", &layers, Compression::Gzip, json!({}), "amd64").await;
    let dir = tempfile::tempdir().expect("a runtime directory");
    let store = Store::open(dir.path()).expect("a store");
    let target = registry::resolve("test/together/once:1", &declared(r, dir.path(), true)).expect("a target");
    let opts = options();
    let progress = Arc::new(Mutex::new(0));
    let (p1, p2) = (progress.clone(), progress.clone());
    let (mut hear1, mut hear2) =
        (move |_: Progress| *p1.lock().expect("lock") += 1, move |_: Progress| *p2.lock().expect("lock") += 1);
    let (a, b) = tokio::join!(pull(&store, &target, &opts, &mut hear1), pull(&store, &target, &opts, &mut hear2));
    let (a, b) = (a.expect("first"), b.expect("second"));
    assert_eq!(a.image.root, b.image.root, "one root for both");
    for blob in [&pushed.config].into_iter().chain(&pushed.layers) {
        assert_eq!(r.blob_gets(blob), 1, "{blob} fetched once for two pulls");
    }
    assert_eq!(roots(&store), 1);
}

/// How a declared registry is signed in to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Credentials {
    None,
    /// The test user, its password in a file of the server's user.
    File,
    /// The same, the file readable by anyone (a Slurm job's user reads it on the node).
    Shared,
}

/// Declares registry `name` at `host` and `images` (TOML entries of `[images]`) with
/// `sessiond apply`'s code; the directory returned holds the password file, kept while it
/// is needed.
async fn declare(
    app: &crate::support::TestApp,
    (name, host): (&str, &str),
    credentials: Credentials,
    images: &str,
) -> tempfile::TempDir {
    let secrets = tempfile::tempdir().expect("a directory for the password");
    let password = secrets.path().join("password");
    std::fs::write(&password, PASSWORD).expect("the password file");
    if credentials == Credentials::Shared {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(secrets.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let sign_in = match credentials {
        Credentials::None => String::new(),
        _ => format!("username = \"{USER}\"\npassword_file = \"{}\"\n", password.display()),
    };
    let text = format!("[registries.{name}]\nurl = \"http://{host}\"\ninsecure = true\n{sign_in}{images}");
    let slots = sessiond::domain::directory::apply::known_slots(&app.db).await.expect("slots");
    let declared = sessiond::domain::directory::apply::file::parse(
        &[sessiond::domain::directory::apply::Source { name: "registry.toml".into(), text }],
        &slots,
    )
    .unwrap_or_else(|p| panic!("{p:#?}"));
    sessiond::domain::directory::apply::apply(
        &app.db,
        &declared,
        sessiond::domain::directory::apply::Options::new(false, false),
    )
    .await
    .expect("applied");
    secrets
}

/// An image of Debian's static busybox (`/bin/sh` and friends as links to it), a file of
/// its own in a second layer, `Env` and `WorkingDir`, pushed as `repo:tag`; `None` where
/// the machine has no static busybox.
async fn busybox_image(r: &Registry, repo: &str, tag: &str) -> Option<crate::support::registry::Pushed> {
    let busybox = std::fs::read("/bin/busybox").ok()?;
    let mut system = vec![Entry::Dir("bin"), Entry::File("bin/busybox", &busybox, 0o755)];
    let tools = ["sh", "cat", "echo", "pwd", "ls", "env", "id", "sleep", "test"];
    let links: Vec<String> = tools.iter().map(|t| format!("bin/{t}")).collect();
    system.extend(links.iter().map(|l| Entry::Symlink(l, "busybox")));
    let own = tar(&[
        Entry::Dir("srv/app"),
        Entry::File("etc/motd", b"made by the image", 0o644),
        // Where the sandbox mounts, a link out of the root: replaced by a real directory.
        Entry::Symlink("home", "/etc"),
    ]);
    let config = json!({"Env": ["PATH=/bin", "GREETING=from-image", "ONLY_IMAGE=kept"], "WorkingDir": "/srv/app", "User": "1000"});
    Some(r.push_image(repo, tag, &[tar(&system), own], Compression::Gzip, config, "amd64").await)
}

/// A session whose image is an OCI reference runs in that image: its files (not the
/// host's), its `Env` under the session's own variables, its `WorkingDir`; the image's
/// `User` is not honoured and the log says so; the session went through PULLING, and the
/// next one of the same image does not.
async fn a_session_runs_in_its_pulled_image(mut app: crate::support::TestApp) {
    use crate::local_runtime::{Machine, ended, input, launch, logs, until};
    let Some(r) = registry() else { return };
    let Some(_) = busybox_image(r, "sessions/busybox", "1").await else {
        if std::env::var("SESSIOND_REQUIRE_REGISTRY").is_ok_and(|v| v == "1") {
            panic!("no /bin/busybox (Debian's busybox-static) for the image a session runs in");
        }
        return;
    };
    let machine = Machine::new();
    let _password = declare(
        &app,
        ("test", &r.host),
        Credentials::File,
        "[images.\"busybox:1\"]\ntypes = [\"BATCH\", \"INTERACTIVE\"]\nref = \"test/sessions/busybox:1\"\n",
    )
    .await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let script = "echo \"greeting=$GREETING only=$ONLY_IMAGE\"; echo \"cwd=$(pwd)\"; cat /etc/motd; echo; \
                  test -e /usr/bin/python3 && echo host-python || echo no-host-python; id -u";
    let env = json!({"image": "busybox:1", "environment": [{"name": "GREETING", "value": "mine"}]});
    let id = launch(&app, "demo-alice", input("in-the-image", script, 256, env.clone())).await;
    let s = until(&app, &id, ended).await;
    let text = logs(&s);
    assert_eq!((s["status"].as_str(), s["exitCode"].as_i64()), (Some("TERMINATED"), Some(0)), "{s}");
    assert!(text.contains("greeting=mine only=kept"), "the session's own variable wins: {text}");
    assert!(text.contains("cwd=/srv/app"), "the image's WorkingDir: {text}");
    assert!(text.contains("made by the image"), "{text}");
    assert!(text.contains("no-host-python"), "the image's files, not the host's: {text}");
    assert!(text.contains("the image asks to run as user 1000"), "{text}");
    let path: Vec<&str> =
        s["statusTransitions"].as_array().expect("transitions").iter().filter_map(|t| t["toStatus"].as_str()).collect();
    assert!(path.contains(&"PULLING"), "the first session pulled: {path:?}");

    let again = launch(&app, "demo-alice", input("warm", "cat /etc/motd", 256, env)).await;
    let s = until(&app, &again, ended).await;
    assert_eq!(s["exitCode"].as_i64(), Some(0), "{s}");
    let path: Vec<&str> =
        s["statusTransitions"].as_array().expect("transitions").iter().filter_map(|t| t["toStatus"].as_str()).collect();
    assert!(!path.contains(&"PULLING"), "a warm cache goes straight on: {path:?}");
}

/// A pull that fails ends the session ERROR in the registry's words, with PULL_FAILED in
/// its history, and leaves no root.
async fn a_failed_pull_is_an_error_in_the_registrys_words(mut app: crate::support::TestApp) {
    use crate::local_runtime::{Machine, ended, input, launch, until};
    let Some(r) = registry() else { return };
    let machine = Machine::new();
    // Declared without credentials: the registry refuses.
    let _password = declare(
        &app,
        ("anon", &r.host),
        Credentials::None,
        "[images.\"nothing:1\"]\ntypes = [\"BATCH\"]\nref = \"anon/sessions/none:1\"\n",
    )
    .await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let id = launch(&app, "demo-alice", input("refused", "true", 256, json!({"image": "nothing:1"}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(s["status"].as_str(), Some("ERROR"), "{s}");
    let info = s["statusInfo"].as_str().unwrap_or_default();
    assert!(info.starts_with("pull failed: unauthorized"), "{info}");
    assert!(!info.contains(PASSWORD));
    let history = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { schedulingHistory { edges { node { errorCode } } } } }",
            json!({"id": id}),
        )
        .await;
    let codes: Vec<&str> = history["data"]["session"]["schedulingHistory"]["edges"]
        .as_array()
        .unwrap_or_else(|| panic!("{history}"))
        .iter()
        .filter_map(|h| h["node"]["errorCode"].as_str())
        .collect();
    assert!(codes.contains(&"PULL_FAILED"), "{history}");
    assert_eq!(std::fs::read_dir(machine.path().join("oci/roots")).map(|d| d.count()).unwrap_or(0), 0);
}

/// A pull that takes a few seconds (the registry behind a slow link) shows: the session's
/// `pull` grows, PULL_PROGRESS events tell each step without going backwards, the last at
/// every byte and layer, and the digest of what ran is recorded.
async fn a_slow_pull_shows_its_progress(mut app: crate::support::TestApp) {
    use crate::local_runtime::{Machine, ended, input, launch, until};
    use sessiond::domain::live::events::EventKind;
    let Some(r) = registry() else { return };
    let Ok(busybox) = std::fs::read("/bin/busybox") else { return };
    // About 5 s at 1 MB/s: a layer that does not compress, and the shell.
    let noise: Vec<u8> = (0..4_000_000_u32).map(|n| (n.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let layers = [
        tar(&[Entry::Dir("bin"), Entry::File("bin/busybox", &busybox, 0o755), Entry::Symlink("bin/sh", "busybox")]),
        tar(&[Entry::File("data/noise", &noise, 0o644)]),
    ];
    let pushed =
        r.push_image("slow/pull", "1", &layers, Compression::Gzip, json!({"Env": ["PATH=/bin"]}), "amd64").await;
    let slow = crate::support::registry::throttled(&r.host, 1_000_000).await;
    let machine = Machine::new();
    let _password = declare(
        &app,
        ("slow", &slow),
        Credentials::File,
        "[images.\"slow:1\"]\ntypes = [\"BATCH\"]\nref = \"slow/slow/pull:1\"\n",
    )
    .await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let mut events = app.bus.subscribe();
    let id = launch(&app, "demo-alice", input("slowly", "true", 256, json!({"image": "slow:1"}))).await;
    // While it pulls, the session shows how far.
    let seen = app
        .wait_for(
            "demo-alice",
            "query($id: ID!) { session(id: $id) { status pull { bytesDone bytesTotal layersDone layersTotal } } }",
            json!({"id": id}),
            |r| r["data"]["session"]["pull"]["bytesDone"].as_i64().is_some_and(|b| b > 0),
        )
        .await;
    let pull = &seen["data"]["session"]["pull"];
    assert_eq!(seen["data"]["session"]["status"], "PULLING", "{seen}");
    assert_eq!((pull["bytesTotal"].as_u64(), pull["layersTotal"].as_i64()), (Some(pushed.bytes), Some(2)), "{seen}");
    // The page's own list says how far (compiled), and so does the CSV's status cell.
    let p = crate::support::project("default/default");
    let list = app
        .gql(
            Some("demo-alice"),
            &crate::support::page_document("page.ts", "LIST"),
            crate::compiled::page_variables(&p, "MINE", "RUNNING"),
        )
        .await;
    let rows = list["data"]["sessions"]["edges"].as_array().cloned().unwrap_or_default();
    let row = rows.iter().find(|e| e["node"]["id"] == json!(id)).unwrap_or_else(|| panic!("listed: {list}"));
    let percent = row["node"]["pull"]["percent"].as_i64().unwrap_or_else(|| panic!("the list's pull: {list}"));
    assert!((0..=100).contains(&percent), "{list}");
    let (_, _, csv) =
        crate::export::export(&app, Some("demo-alice"), &format!("projectId={p}&columns=NAME,STATUS")).await;
    let records = crate::export::records(&csv);
    let status = records.iter().find(|r| r[0] == "slowly").map(|r| r[1].clone()).expect("the CSV's row");
    // Still pulling (it takes seconds more), or gone on since: never PULLING alone.
    let pulling = status.strip_prefix("PULLING ").and_then(|p| p.strip_suffix(" %"));
    assert!(pulling.is_some_and(|p| p.parse::<u8>().is_ok()) || !status.starts_with("PULLING"), "{status}");
    let s = until(&app, &id, ended).await;
    assert_eq!(s["exitCode"].as_i64(), Some(0), "{s}");
    let uuid = crate::local_runtime::session_uuid(&id);
    let mut steps = Vec::new();
    while let Ok(e) = events.try_recv() {
        if e.kind == EventKind::PullProgress && e.session.id.to_string() == uuid {
            let (progress, _) =
                sessiond::domain::runtime::reconcile::stored_progress(&e.session).expect("the event's progress");
            steps.push(progress);
        }
    }
    assert!(steps.len() >= 2, "progress told as it went: {steps:?}");
    assert!(steps.windows(2).all(|w| w[1].bytes_done >= w[0].bytes_done && w[1].layers_done >= w[0].layers_done));
    let last = steps.last().expect("a last step");
    assert_eq!((last.bytes_done, last.layers_done), (pushed.bytes, 2), "the last at every byte: {steps:?}");
    let digest = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { image { digest } pull { bytesDone } } }",
            json!({"id": id}),
        )
        .await;
    assert_eq!(digest["data"]["session"]["image"]["digest"], json!(pushed.manifest), "{digest}");
    assert_eq!(digest["data"]["session"]["pull"], Value::Null, "no progress once it has ended");
}

/// A relaunch runs the digest its session ran, though the tag moved since; asked for the
/// newest, it runs what the tag names now.
async fn a_relaunch_runs_the_same_digest_unless_asked_for_the_newest(mut app: crate::support::TestApp) {
    use crate::local_runtime::{Machine, ended, input, launch, logs, until};
    let Some(r) = registry() else { return };
    let Ok(busybox) = std::fs::read("/bin/busybox") else { return };
    let version = |v: &'static [u8]| {
        vec![
            tar(&[
                Entry::Dir("bin"),
                Entry::File("bin/busybox", &busybox, 0o755),
                Entry::Symlink("bin/sh", "busybox"),
                Entry::Symlink("bin/cat", "busybox"),
            ]),
            tar(&[Entry::File("version", v, 0o644)]),
        ]
    };
    let first = r
        .push_image("pin/app", "1", &version(b"first"), Compression::Gzip, json!({"Env": ["PATH=/bin"]}), "amd64")
        .await;
    let machine = Machine::new();
    let _password = declare(
        &app,
        ("test", &r.host),
        Credentials::File,
        "[images.\"app:1\"]\ntypes = [\"BATCH\"]\nref = \"test/pin/app:1\"\n",
    )
    .await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let id = launch(&app, "demo-alice", input("pinned", "cat /version", 256, json!({"image": "app:1"}))).await;
    let s = until(&app, &id, ended).await;
    assert!(logs(&s).contains("first"), "{s}");
    // The tag moves on.
    let second = r
        .push_image("pin/app", "1", &version(b"second"), Compression::Gzip, json!({"Env": ["PATH=/bin"]}), "amd64")
        .await;
    assert_ne!(first.manifest, second.manifest);
    const RELAUNCH: &str =
        "mutation($id: ID!, $o: RelaunchOverrides) { relaunchSession(id: $id, overrides: $o) { session { id } } }";
    let again = |newest: bool| {
        let app = &app;
        let id = id.clone();
        async move {
            let resp = app.gql(Some("demo-alice"), RELAUNCH, json!({"id": id, "o": {"newestImage": newest}})).await;
            resp["data"]["relaunchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
        }
    };
    let digest_of = |id: String| {
        let app = &app;
        async move {
            let r = app
                .gql(Some("demo-alice"), "query($id: ID!) { session(id: $id) { image { digest } } }", json!({"id": id}))
                .await;
            r["data"]["session"]["image"]["digest"].as_str().map(str::to_owned)
        }
    };
    let same = again(false).await;
    let s = until(&app, &same, ended).await;
    assert!(logs(&s).contains("first") && !logs(&s).contains("second"), "the digest that ran before: {s}");
    assert_eq!(digest_of(same).await.as_deref(), Some(first.manifest.as_str()));
    let newest = again(true).await;
    let s = until(&app, &newest, ended).await;
    assert!(logs(&s).contains("second"), "the tag's newest: {s}");
    assert_eq!(digest_of(newest).await.as_deref(), Some(second.manifest.as_str()));
}

/// A Slurm session whose image is an OCI reference: the job's supervisor on the node pulls
/// it into the store on the shared directory and runs in it; the digest is recorded.
async fn a_slurm_session_runs_in_its_pulled_image(mut app: crate::support::TestApp) {
    use crate::local_runtime::{ended, launch, logs, until};
    let Some(r) = registry() else { return };
    let Some(c) = crate::support::slurm::cluster() else { return };
    let Some(pushed) = busybox_image(r, "slurm/busybox", "1").await else { return };
    let _one = crate::support::slurm::lock().await;
    c.cancel_all();
    crate::slurm::on_slurm(&mut app, c, 2000).await;
    // The jobs' user reads the password on the node.
    let _password = declare(
        &app,
        ("test", &r.host),
        Credentials::Shared,
        "[images.\"busybox:1\"]\ntypes = [\"BATCH\"]\nref = \"test/slurm/busybox:1\"\n",
    )
    .await;
    let input = json!({
        "projectId": crate::support::project("default/default"), "name": "on-a-node", "image": "busybox:1",
        "type": "BATCH", "resourceGroup": crate::slurm::GROUP, "startupCommand": "cat /etc/motd; echo; pwd",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 256_i64 << 20}],
    });
    let id = launch(&app, "demo-alice", input.clone()).await;
    let s = until(&app, &id, ended).await;
    let text = logs(&s);
    assert_eq!(s["exitCode"].as_i64(), Some(0), "{s}");
    assert!(
        text.contains("made by the image") && text.contains("/srv/app"),
        "the image's files and WorkingDir: {text}"
    );
    let digest = app
        .gql(Some("demo-alice"), "query($id: ID!) { session(id: $id) { image { digest } } }", json!({"id": id}))
        .await;
    assert_eq!(digest["data"]["session"]["image"]["digest"], json!(pushed.manifest), "{digest}");

    // A registry the node cannot reach: the session fails, saying so, after the retries.
    let gone = GONE;
    let _declared = declare(
        &app,
        ("gone", gone),
        Credentials::None,
        "[images.\"gone:1\"]\ntypes = [\"BATCH\"]\nref = \"gone/slurm/busybox:1\"\n",
    )
    .await;
    let mut unreachable = input.clone();
    unreachable["image"] = json!("gone:1");
    unreachable["name"] = json!("unreachable");
    let id = launch(&app, "demo-alice", unreachable).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(s["status"], "ERROR", "{s}");
    assert!(s["statusInfo"].as_str().is_some_and(|i| i.contains("registry unreachable")), "{s}");
}

crate::db_tests!(
    an_imported_image_runs_a_session_offline,
    a_slurm_session_runs_in_its_pulled_image,
    a_relaunch_runs_the_same_digest_unless_asked_for_the_newest,
    a_session_runs_in_its_pulled_image,
    a_failed_pull_is_an_error_in_the_registrys_words,
    a_slow_pull_shows_its_progress,
);

/// The store over its limit removes the images no session runs, least recently used first,
/// never one in use; `sessiond images ls` and `prune` say and do the same.
#[tokio::test]
async fn over_its_limit_the_store_removes_what_no_session_runs() {
    let Some(r) = registry() else { return };
    let image = |seed: u32| -> Vec<u8> {
        let data: Vec<u8> =
            (0..100_000_u32).map(|n| (n.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 9) as u8).collect();
        tar(&[Entry::File("data", &data, 0o644)])
    };
    let a = r.push_image("cache/a", "1", &[image(1)], Compression::Gzip, json!({}), "amd64").await;
    let b = r.push_image("cache/b", "1", &[image(2)], Compression::Gzip, json!({}), "amd64").await;
    let dir = tempfile::tempdir().expect("a runtime directory");
    let store = Store::open(dir.path()).expect("a store");
    let registries = declared(r, dir.path(), true);
    let target = |repo: &str| registry::resolve(&format!("test/{repo}:1"), &registries).expect("a target");
    pull_recording(&store, &target("cache/a"), &options()).await.0.expect("a");
    let held_a = store.hold(&a.manifest).expect("a in use");
    pull_recording(&store, &target("cache/b"), &options()).await.0.expect("b");
    let held_b = store.hold(&b.manifest).expect("b in use");
    let one = store.size() / 2 + 1_000;
    assert!(store.evict(one).is_empty(), "both are in use: neither goes");
    assert_eq!(roots(&store), 2);

    // The CLI sees the same store.
    let ls = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["images", "ls", "--runtime-dir"])
        .arg(dir.path())
        .output()
        .expect("images ls");
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.status.success() && text.contains(&a.manifest) && text.contains(&b.manifest), "{text}");
    assert_eq!(text.matches(" yes ").count(), 2, "both in use: {text}");

    drop(held_a);
    assert_eq!(store.evict(one), vec![a.manifest.clone()], "the unused one goes, the one in use stays");
    assert!(store.unpacked(&b.manifest).is_some() && store.unpacked(&a.manifest).is_none());
    assert!(!store.has_blob(&a.layers[0]) && store.has_blob(&b.layers[0]), "its blobs go with it, no other's");
    // Needed again, it is pulled again.
    assert!(pull_recording(&store, &target("cache/a"), &options()).await.0.expect("a again").fetched);

    drop(held_b);
    let prune = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["images", "prune", "--runtime-dir"])
        .arg(dir.path())
        .output()
        .expect("images prune");
    assert!(prune.status.success(), "{}", String::from_utf8_lossy(&prune.stderr));
    assert_eq!(roots(&store), 0, "prune removes every image not in use");
}

/// A layout's blobs, keyed by digest, and its index file.
struct Layout {
    blobs: Vec<(String, Vec<u8>)>,
    index: Value,
}

impl Layout {
    fn add(&mut self, bytes: Vec<u8>) -> (String, usize) {
        let d = crate::support::registry::digest(&bytes);
        let size = bytes.len();
        self.blobs.push((d.clone(), bytes));
        (d, size)
    }

    /// An image of `layers` (gzip'd) for `architecture`: its manifest's digest and size.
    fn image(&mut self, layers: &[Vec<u8>], config: Value, architecture: &str) -> (String, usize) {
        let mut descriptors = Vec::new();
        let mut diff_ids = Vec::new();
        for t in layers {
            let (blob, media_type) = crate::support::registry::compress(t, Compression::Gzip);
            let (d, size) = self.add(blob);
            descriptors.push(json!({"mediaType": media_type, "digest": d, "size": size}));
            diff_ids.push(crate::support::registry::digest(t));
        }
        let config = json!({"architecture": architecture, "os": "linux", "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids}});
        let (cd, cs) = self.add(serde_json::to_vec(&config).expect("a config"));
        let manifest = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
            "layers": descriptors});
        self.add(serde_json::to_vec(&manifest).expect("a manifest"))
    }

    /// The layout as a gzip'd tar, as `skopeo copy … oci-archive:` writes one.
    fn archive(&self, at: &Path) {
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let mut put = |path: &str, bytes: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, path, bytes).expect("an entry");
        };
        put("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#);
        for (d, bytes) in &self.blobs {
            put(&format!("blobs/sha256/{}", d.trim_start_matches("sha256:")), bytes);
        }
        put("index.json", &serde_json::to_vec(&self.index).expect("an index"));
        let gz = b.into_inner().expect("a tar").finish().expect("gzip");
        std::fs::write(at, gz).expect("the archive");
    }
}

/// This machine's architecture, as an image index says it.
fn this_arch() -> String {
    sessiond::domain::runtime::image::platform().trim_start_matches("linux/").to_owned()
}

/// `images import` loads an OCI layout (its multi-platform index: this machine's image
/// only) and a `docker save` archive (two images, one layer a link to another's) without a
/// registry; each is known by the references the file names it by. A blob that does not
/// match its name fails and leaves nothing.
#[test]
fn an_oci_layout_and_a_docker_save_archive_are_imported() {
    use sessiond::domain::runtime::image::import::import;
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::open(&dir.path().join("runtime")).expect("a store");
    let options = Options::default();

    let mut layout = Layout { blobs: Vec::new(), index: json!({}) };
    let base = tar(&[Entry::Dir("etc"), Entry::File("etc/motd", b"imported", 0o644)]);
    let mine = layout.image(std::slice::from_ref(&base), json!({"Env": ["A=1"]}), &this_arch());
    let other = layout.image(&[tar(&[Entry::File("etc/motd", b"the other platform", 0o644)])], json!({}), "s390x");
    let nested = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": other.0, "size": other.1,
         "platform": {"os": "linux", "architecture": "s390x"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mine.0, "size": mine.1,
         "platform": {"os": "linux", "architecture": this_arch()}}]});
    let (index, size) = layout.add(serde_json::to_vec(&nested).expect("an index"));
    layout.index = json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
        "digest": index, "size": size, "annotations": {"io.containerd.image.name": "example.org/tools/layout:1",
        "org.opencontainers.image.ref.name": "1"}}]});
    let file = dir.path().join("layout.tar.gz");
    layout.archive(&file);
    let imported = import(&store, &file, &[], &options).expect("imported");
    assert_eq!(imported.len(), 1, "this platform's image only");
    assert_eq!(imported[0].image.record.digest, mine.0);
    assert_eq!(imported[0].references, vec!["example.org/tools/layout:1".to_owned()]);
    assert_eq!(store.resolved("example.org/tools/layout:1").as_deref(), Some(mine.0.as_str()));
    assert_eq!(std::fs::read(imported[0].image.root.join("etc/motd")).expect("motd"), b"imported");
    let other_layer = &layout.blobs[3].0;
    assert!(!store.has_blob(other_layer) && !store.has_blob(&index), "no blob no image here needs is kept");
    assert!(
        import(&store, &file, &["a/b:1".into(), "bad ref".into()], &options).is_err(),
        "a name must be a reference"
    );

    // `docker save` before Docker 25: layers as `ID/layer.tar`, a config `HEX.json`.
    let config = |cmd: &str| {
        serde_json::to_vec(&json!({"architecture": this_arch(), "os": "linux", "config": {"Cmd": [cmd]},
            "rootfs": {"type": "layers", "diff_ids": [crate::support::registry::digest(&base)]}}))
        .expect("a config")
    };
    let (two, three) = (config("two"), config("three"));
    let name = |c: &[u8]| format!("{}.json", crate::support::registry::digest(c).trim_start_matches("sha256:"));
    let manifest = json!([
        {"Config": name(&two), "RepoTags": ["tools:2"], "Layers": ["l1/layer.tar"]},
        {"Config": name(&three), "RepoTags": ["tools:3"], "Layers": ["l2/layer.tar"]}]);
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    for (path, bytes) in [(name(&two).as_str(), &two[..]), (&name(&three), &three), ("l1/layer.tar", &base)] {
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, bytes).expect("an entry");
    }
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "l2/layer.tar", "../l1/layer.tar").expect("a link");
    let bytes = serde_json::to_vec(&manifest).expect("manifest.json");
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(bytes.len() as u64);
    b.append_data(&mut h, "manifest.json", &bytes[..]).expect("manifest.json");
    let saved = dir.path().join("saved.tar");
    std::fs::write(&saved, b.into_inner().expect("a tar")).expect("the archive");
    assert!(
        matches!(import(&store, &saved, &["example.org/x:1".into()], &options), Err(PullError::Invalid(_))),
        "a name given applies to one image"
    );
    let imported = import(&store, &saved, &[], &options).expect("imported");
    let refs: Vec<&str> = imported.iter().flat_map(|i| i.references.iter().map(String::as_str)).collect();
    assert_eq!(refs.len(), 2, "{refs:?}");
    assert!(refs.contains(&"docker.io/library/tools:2") && refs.contains(&"docker.io/library/tools:3"), "{refs:?}");
    for i in &imported {
        assert_eq!(std::fs::read(i.image.root.join("etc/motd")).expect("motd"), b"imported");
        assert_eq!(store.resolved(&i.references[0]).as_deref(), Some(i.image.record.digest.as_str()));
    }
    assert_eq!(imported[0].image.record.config.cmd.len(), 1);

    // A blob whose bytes are not its name's.
    let fresh = tempfile::tempdir().expect("a directory");
    let store = Store::open(fresh.path()).expect("a store");
    let mut tampered = Layout { blobs: Vec::new(), index: json!({}) };
    let (m, s) = tampered.image(&[tar(&[Entry::File("x", b"x", 0o644)])], json!({}), &this_arch());
    tampered.index = json!({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": m, "size": s}]});
    tampered.blobs[0].1.push(0);
    let file = fresh.path().join("tampered.tar.gz");
    tampered.archive(&file);
    let e = import(&store, &file, &["example.org/x:1".into()], &options).expect_err("refused");
    assert!(matches!(e, PullError::DigestMismatch { .. }), "{e}");
    assert_eq!(roots(&store), 0);
    assert!(!store.has_blob(&tampered.blobs[0].0), "nothing of it is kept");
}

/// An image imported from a file runs a session while its registry cannot be reached: the
/// pull finds it at once, and the session records its digest.
/// A registry no one answers: a port below 1024, which no test's server binds (they take
/// ephemeral ports). A port freed after binding it could be taken meanwhile by another
/// test's server, whose 404 would then be a registry's "not found".
const GONE: &str = "127.0.0.1:1";

async fn an_imported_image_runs_a_session_offline(mut app: crate::support::TestApp) {
    use crate::local_runtime::{Machine, ended, input, launch, logs, until};
    let Ok(busybox) = std::fs::read("/bin/busybox") else {
        assert!(
            !std::env::var("SESSIOND_REQUIRE_REGISTRY").is_ok_and(|v| v == "1"),
            "no /bin/busybox (Debian's busybox-static) for the imported image"
        );
        return;
    };
    let machine = Machine::new();
    let gone = GONE;
    let mut layout = Layout { blobs: Vec::new(), index: json!({}) };
    let layer = tar(&[
        Entry::Dir("bin"),
        Entry::File("bin/busybox", &busybox, 0o755),
        Entry::Symlink("bin/sh", "busybox"),
        Entry::Symlink("bin/cat", "busybox"),
        Entry::File("etc/motd", b"imported for offline use", 0o644),
    ]);
    let (manifest, size) = layout.image(&[layer], json!({"Env": ["PATH=/bin"]}), &this_arch());
    layout.index = json!({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest, "size": size}]});
    let file = machine.path().with_extension("oci.tar.gz");
    layout.archive(&file);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["images", "import"])
        .arg(&file)
        .args(["--as", &format!("{gone}/tools/busybox:1"), "--runtime-dir"])
        .arg(machine.path())
        .output()
        .expect("images import");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&manifest));

    let _declared = declare(
        &app,
        ("offline", gone),
        Credentials::None,
        "[images.\"tools:1\"]\ntypes = [\"BATCH\"]\nref = \"offline/tools/busybox:1\"\n",
    )
    .await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let id = launch(&app, "demo-alice", input("offline", "cat /etc/motd", 256, json!({"image": "tools:1"}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(s["exitCode"].as_i64(), Some(0), "{s}");
    assert!(logs(&s).contains("imported for offline use"), "{s}");
    let image = app
        .gql(Some("demo-alice"), "query($id: ID!) { session(id: $id) { image { name digest } } }", json!({"id": id}))
        .await;
    assert_eq!(image["data"]["session"]["image"], json!({"name": "tools:1", "digest": manifest}), "{image}");
}
