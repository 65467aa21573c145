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
    let slots = sessiond::domain::apply::known_slots(&app.db).await.expect("slots");
    let declared = sessiond::domain::apply::file::parse(
        &[sessiond::domain::apply::Source { name: "registry.toml".into(), text }],
        &slots,
    )
    .unwrap_or_else(|p| panic!("{p:#?}"));
    sessiond::domain::apply::apply(&app.db, &declared, sessiond::domain::apply::Options::new(false, false))
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
    use sessiond::domain::events::EventKind;
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
            "query($id: ID!) { session(id: $id) { imageDigest pull { bytesDone } } }",
            json!({"id": id}),
        )
        .await;
    assert_eq!(digest["data"]["session"]["imageDigest"], json!(pushed.manifest), "{digest}");
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
                .gql(Some("demo-alice"), "query($id: ID!) { session(id: $id) { imageDigest } }", json!({"id": id}))
                .await;
            r["data"]["session"]["imageDigest"].as_str().map(str::to_owned)
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
    let id = launch(&app, "demo-alice", input).await;
    let s = until(&app, &id, ended).await;
    let text = logs(&s);
    assert_eq!(s["exitCode"].as_i64(), Some(0), "{s}");
    assert!(
        text.contains("made by the image") && text.contains("/srv/app"),
        "the image's files and WorkingDir: {text}"
    );
    let digest =
        app.gql(Some("demo-alice"), "query($id: ID!) { session(id: $id) { imageDigest } }", json!({"id": id})).await;
    assert_eq!(digest["data"]["session"]["imageDigest"], json!(pushed.manifest), "{digest}");
}

crate::db_tests!(
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
