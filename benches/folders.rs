//! A folder's files over HTTP beside nginx (Debian), and the cost of reading a folder's use,
//! in one run.
//!
//! - **1 GiB upload and download**, by `curl` (the same client for both), to sessiond's
//!   `/folders/{id}/files/…` (bearer token, the file streamed into the folder's ext4 image,
//!   hidden until whole) and to nginx's WebDAV `PUT` / static `GET` on the same folder's
//!   mounted directory (its body buffered to a temporary file on the same file system, then
//!   renamed). MB/s of each, every run, in turn, each after a `sync` (the writeback of the
//!   transfer before is not charged to the next).
//! - **`usage` of a folder of 100 000 files**: the p50 of `folders { usage { bytes files } }`
//!   minus that of `folders { name }` (the same request without it), beside one walk of the
//!   folder (what a scan per read would cost).
//!
//! `cargo bench --bench folders [-- --runs N]` (default 3; needs nginx, curl, and root for
//! the folder images).

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::json;
use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::nginx::{NGINX, free_port, nginx};
use support::{Server, over_runs, percentile, runs, stamp};

const BIG: u64 = 1 << 30;
const FILES: usize = 100_000;
const READS: usize = 300;

/// nginx serving and taking (`PUT`) the files of `root` on `127.0.0.1:port`, a request's
/// body first in `root`'s own temporary directory (the same file system), its own files
/// under `prefix`.
fn dav_conf(prefix: &str, root: &str, port: u16) -> String {
    format!(
        "worker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  client_max_body_size 0;\n\
         client_body_temp_path {root}/.nginx-body;\n  proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n\
         uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n\
         server {{ listen 127.0.0.1:{port}; root {root}; location / {{ dav_methods PUT; }} }}\n}}\n"
    )
}

/// MB/s of `curl` moving `BIG` bytes with `args`, every dirty page of the machine written
/// out first (else one transfer pays for the writeback of the one before).
fn curl(args: &[&str]) -> f64 {
    assert!(Command::new("sync").status().expect("sync").success());
    let begun = Instant::now();
    let out = Command::new("curl").args(["-sS", "-f", "-o", "/dev/null"]).args(args).output().expect("curl");
    let seconds = begun.elapsed().as_secs_f64();
    assert!(out.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    BIG as f64 / 1e6 / seconds
}

/// Milliseconds of each of `READS` requests of `query`, one at a time.
async fn reads(server: &Server, query: &str) -> Vec<f64> {
    let project = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let mut out = Vec::with_capacity(READS);
    for i in 0..READS + 20 {
        let begun = Instant::now();
        let r = server.gql(query, json!({"p": project})).await;
        assert!(r.get("errors").is_none(), "{r}");
        if i >= 20 {
            out.push(begun.elapsed().as_secs_f64() * 1000.0);
        }
    }
    out
}

/// Entries under `dir`, by a walk of it.
fn walk(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("a directory").flatten() {
        n += 1;
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            n += walk(&e.path());
        }
    }
    n
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench folders");
    assert!(Path::new(NGINX).exists(), "{NGINX} (Debian: nginx)");
    assert!(sessiond::domain::storage::volume::images_here(), "folder images need root and e2fsprogs");
    let work = tempfile::tempdir().expect("a work directory");
    let storage = work.path().join("storage");
    std::fs::create_dir_all(&storage).expect("the storage");
    {
        use std::os::unix::fs::PermissionsExt;
        for d in [work.path(), storage.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711)).expect("chmod");
        }
    }
    let server = Server::start("sqlite", &[]).await;
    let declaration = work.path().join("storage.toml");
    std::fs::write(&declaration, format!("[storage.bench]\npath = \"{}\"\nquota = \"6 GiB\"\n", storage.display()))
        .expect("a declaration");
    server.apply(&declaration);
    let project = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let made = server
        .gql(
            "mutation($p: ID!) { createFolder(projectId: $p, name: \"data\", scope: USER, quotaBytes: 5368709120) { folder { id } } }",
            json!({"p": project}),
        )
        .await;
    let id = made["data"]["createFolder"]["folder"]["id"].as_str().unwrap_or_else(|| panic!("{made}")).to_owned();
    let uuid = sessiond::graphql::ids::decode(&id).map(|(_, u)| u).expect("a folder id");
    let folder = storage.join(&uuid);

    let source = work.path().join("source.bin");
    std::fs::File::create(&source).expect("the file").set_len(BIG).expect("1 GiB");
    let source = source.to_str().expect("utf8").to_owned();
    let port = free_port();
    let prefix = work.path().join("nginx");
    let _nginx = nginx(&prefix, &dav_conf(&prefix.display().to_string(), &folder.display().to_string(), port));
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ours = format!("http://{}/folders/{id}/files/ours.bin", server.base);
    let theirs = format!("http://127.0.0.1:{port}/theirs.bin");
    let auth = "Authorization: Bearer demo-alice";

    let mut figures: [Vec<f64>; 4] = Default::default();
    for round in 0..runs() {
        let up_ours = curl(&["-T", &source, "-H", auth, &ours]);
        let up_theirs = curl(&["-T", &source, &theirs]);
        let down_ours = curl(&["-H", auth, &ours]);
        let down_theirs = curl(&[&theirs]);
        eprintln!(
            "round {round}: upload sessiond {up_ours:.0} nginx {up_theirs:.0} MB/s; download sessiond {down_ours:.0} nginx {down_theirs:.0} MB/s"
        );
        for (i, x) in [up_ours, up_theirs, down_ours, down_theirs].into_iter().enumerate() {
            figures[i].push(x);
        }
    }

    // A folder of 100 000 files.
    let many = folder.join("many");
    std::fs::create_dir(&many).expect("a directory");
    for i in 0..FILES {
        std::fs::write(many.join(format!("f{i}")), b"x").expect("a file");
    }
    let begun = Instant::now();
    let walked = walk(&folder);
    let walk_ms = begun.elapsed().as_secs_f64() * 1000.0;
    let with = reads(&server, "query($p: ID!) { folders(projectId: $p) { name usage { bytes files } } }").await;
    let without = reads(&server, "query($p: ID!) { folders(projectId: $p) { name } }").await;
    let usage =
        server.gql("query($p: ID!) { folders(projectId: $p) { usage { files } } }", json!({"p": project})).await;
    assert!(usage["data"]["folders"][0]["usage"]["files"].as_u64().is_some_and(|n| n > FILES as u64), "{usage}");

    println!("1 GiB by curl (the same client for both), into and out of the same folder's ext4 image\n");
    println!("| | sessiond MB/s | nginx MB/s | sessiond ÷ nginx | runs (sessiond; nginx) |");
    println!("|---|---|---|---|---|");
    for (what, a, b) in [("upload", 0, 1), ("download", 2, 3)] {
        let (ours, ours_runs) = over_runs(&figures[a], 0);
        let (theirs, theirs_runs) = over_runs(&figures[b], 0);
        println!("| {what} | {ours:.0} | {theirs:.0} | {:.2} | {ours_runs}; {theirs_runs} |", ours / theirs);
    }
    let (p_with, p_without) = (percentile(with, 0.5), percentile(without, 0.5));
    println!(
        "\n`usage` of a folder of {FILES} files ({walked} entries): `folders` p50 {p_with:.3} ms with it, \
         {p_without:.3} ms without: **{:.3} ms per read**; one walk of the folder takes {walk_ms:.0} ms",
        p_with - p_without
    );
    // The folder's image goes with its mount.
    let _ = server.gql("mutation($id: ID!) { deleteFolder(id: $id) }", json!({"id": id})).await;
}
