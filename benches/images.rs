//! Images pulled from a real registry (Debian's `docker-registry`, htpasswd auth, on
//! loopback), side by side with the anchor, in one run:
//!
//! - **Pull and unpack** of a generated image of 5 layers, 100 MB each (1 000 files of
//!   100 KB per layer, gzip): `sessiond images pull` into a fresh store, against `skopeo
//!   copy` into an OCI layout followed by `umoci unpack --rootless`, each under GNU `time`
//!   (elapsed, peak RSS). MB/s is the image's unpacked size over the elapsed time.
//! - **Launch to RUNNING with a warm cache**: a release server with the local runtime runs
//!   batch `true` sessions of the image (a static busybox and the same 500 MB) once pulled,
//!   alternating with sessions of a host-root image; creation to RUNNING, p50.
//!
//! `cargo bench --bench images [-- --runs N]` (default 3; needs docker-registry, skopeo,
//! umoci, busybox-static, bubblewrap and GNU time).

#[allow(dead_code)]
#[path = "../tests/integration/support/registry.rs"]
mod registry;
#[path = "../tests/integration/support/required.rs"]
mod required;
#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, over_runs, percentile, runs, stamp};

const LAYERS: usize = 5;
const FILES: usize = 1_000;
const FILE_BYTES: usize = 100_000;
const LAUNCHES: usize = 20;

/// What GNU `time -f "%e %M"` says of a command: seconds elapsed, peak RSS in MiB.
fn timed(command: Command) -> (f64, f64) {
    let report = tempfile::NamedTempFile::new().expect("a report file");
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%e %M", "-o"])
        .arg(report.path())
        .arg(&program)
        .args(&args)
        .envs(command.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))))
        .output()
        .expect("GNU time");
    assert!(out.status.success(), "{program:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(report.path()).expect("time's report");
    let line = text.lines().last().unwrap_or_default();
    let mut words = line.split_whitespace();
    let seconds: f64 = words.next().and_then(|w| w.parse().ok()).expect("elapsed");
    let kib: f64 = words.next().and_then(|w| w.parse().ok()).expect("peak RSS");
    (seconds, kib / 1024.0)
}

/// A layer of `FILES` files: text-like bytes (about a third smaller under gzip), different
/// in every layer.
fn layer(seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut b = tar::Builder::new(Vec::with_capacity(FILES * (FILE_BYTES + 512)));
    for f in 0..FILES {
        let data: Vec<u8> =
            (0..FILE_BYTES).map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789 \n"[(next() % 38) as usize]).collect();
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, format!("data/layer{seed}/file{f:04}"), &data[..]).expect("a file");
    }
    b.into_inner().expect("a tar")
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if meta.is_dir() {
            total += dir_bytes(&entry.path());
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    total
}

fn at(s: &Value, status: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    s["statusTransitions"].as_array()?.iter().find(|t| t["toStatus"] == status)?["occurredAt"].as_str()?.parse().ok()
}

async fn run_once(server: &Server, image: &str, name: &str) -> f64 {
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let input = json!({
        "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0,
        "name": name, "image": image, "resourceGroup": "local", "type": "BATCH", "startupCommand": "true",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 128 << 20}],
    });
    let r = server.gql(launch, json!({"i": input})).await;
    let id = r["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{r}")).to_owned();
    let query = "query($id: ID!) { session(id: $id) { status statusInfo createdAt statusTransitions { toStatus occurredAt } } }";
    loop {
        let r = server.gql(query, json!({"id": id})).await;
        let s = &r["data"]["session"];
        match s["status"].as_str().unwrap_or("") {
            "TERMINATED" => {
                let created: chrono::DateTime<chrono::Utc> =
                    s["createdAt"].as_str().and_then(|c| c.parse().ok()).expect("createdAt");
                let running = at(s, "RUNNING").expect("went through RUNNING");
                return (running - created).num_microseconds().unwrap_or(0) as f64 / 1000.0;
            }
            "ERROR" | "CANCELLED" => panic!("{r}"),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench images");
    let r = registry::registry().expect("docker-registry (Debian's docker-registry package)");
    for tool in ["/usr/bin/skopeo", "/usr/bin/umoci", "/usr/bin/time", "/bin/busybox"] {
        assert!(Path::new(tool).exists(), "{tool} (Debian: skopeo, umoci, time, busybox-static)");
    }
    let generated = Instant::now();
    let busybox = std::fs::read("/bin/busybox").expect("busybox");
    let mut layers = vec![registry::tar(&[
        registry::Entry::Dir("bin"),
        registry::Entry::File("bin/busybox", &busybox, 0o755),
        registry::Entry::Symlink("bin/sh", "busybox"),
        registry::Entry::Symlink("bin/true", "busybox"),
    ])];
    layers.extend((0..LAYERS as u64).map(layer));
    let pushed = r
        .push_image("bench/big", "1", &layers, registry::Compression::Gzip, json!({"Env": ["PATH=/bin"]}), "amd64")
        .await;
    let unpacked_mb = layers.iter().map(|l| l.len() as f64).sum::<f64>() / 1e6;
    drop(layers);
    eprintln!(
        "generated and pushed {LAYERS} layers + busybox: {:.0} MB of blobs, {unpacked_mb:.0} MB of tar, in {:.1}s",
        pushed.bytes as f64 / 1e6,
        generated.elapsed().as_secs_f64()
    );
    let work = tempfile::tempdir().expect("a work directory");
    let password = work.path().join("password");
    std::fs::write(&password, registry::PASSWORD).expect("the password");
    let reference = format!("{}/bench/big:1", r.host);
    let (mut ours_s, mut ours_rss, mut anchor_s, mut anchor_rss, mut ours_mb) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut anchor_mb = vec![];
    for round in 0..runs() {
        let store = work.path().join(format!("store-{round}"));
        let mut pull = Command::new(env!("CARGO_BIN_EXE_sessiond"));
        pull.args(["images", "pull", &reference, "--runtime-dir"])
            .arg(&store)
            .args(["--registry-url", &format!("http://{}", r.host), "--insecure", "--username", registry::USER])
            .arg("--password-file")
            .arg(&password);
        let (s, rss) = timed(pull);
        let rootfs_bytes = dir_bytes(&store.join("oci/roots")) as f64 / 1e6;
        ours_s.push(s);
        ours_rss.push(rss);
        ours_mb.push(rootfs_bytes / s);
        std::fs::remove_dir_all(&store).ok();

        let layout = work.path().join(format!("layout-{round}"));
        let mut copy = Command::new("/usr/bin/skopeo");
        copy.args(["copy", "--quiet", "--src-tls-verify=false", "--src-creds"])
            .arg(format!("{}:{}", registry::USER, registry::PASSWORD))
            .arg(format!("docker://{reference}"))
            .arg(format!("oci:{}:big", layout.display()));
        let (s1, rss1) = timed(copy);
        let bundle = work.path().join(format!("bundle-{round}"));
        let mut unpack = Command::new("/usr/bin/umoci");
        unpack.args(["unpack", "--rootless", "--image"]).arg(format!("{}:big", layout.display())).arg(&bundle);
        let (s2, rss2) = timed(unpack);
        let rootfs_bytes = dir_bytes(&bundle.join("rootfs")) as f64 / 1e6;
        anchor_s.push(s1 + s2);
        anchor_rss.push(rss1.max(rss2));
        anchor_mb.push(rootfs_bytes / (s1 + s2));
        std::fs::remove_dir_all(&layout).ok();
        std::fs::remove_dir_all(&bundle).ok();
        eprintln!(
            "round {round}: sessiond {s:.2}s {rss:.0} MiB; skopeo + umoci {:.2}s {:.0} MiB",
            s1 + s2,
            rss1.max(rss2)
        );
    }
    println!(
        "An image of {LAYERS} layers of {FILES} files of {FILE_BYTES} bytes and a static busybox: {:.0} MB of gzip blobs, \
         {unpacked_mb:.0} MB of tar; a fresh store each run\n",
        pushed.bytes as f64 / 1e6
    );
    println!("| pull and unpack | elapsed s | MB/s (unpacked) | peak RSS MiB | runs (s) |");
    println!("|---|---|---|---|---|");
    for (who, s, mb, rss) in [
        ("`sessiond images pull`", &ours_s, &ours_mb, &ours_rss),
        ("`skopeo copy` + `umoci unpack --rootless`", &anchor_s, &anchor_mb, &anchor_rss),
    ] {
        let (median, each) = over_runs(s, 2);
        println!("| {who} | {median:.2} | {:.0} | {:.0} | {each} |", over_runs(mb, 0).0, over_runs(rss, 0).0);
    }
    println!();
    println!(
        "- sessiond's time ÷ the anchor's: **{:.2}**; its peak RSS ÷ the anchor's: **{:.2}**",
        over_runs(&ours_s, 2).0 / over_runs(&anchor_s, 2).0,
        over_runs(&ours_rss, 0).0 / over_runs(&anchor_rss, 0).0
    );

    // Launch to RUNNING: the image once pulled, against a host-root image.
    let machine = tempfile::tempdir().expect("a machine");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(machine.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    let runtime = machine.path().join("runtime");
    let server =
        Server::start_with("sqlite", &[], &["--runtime", "local", "--runtime-dir", runtime.to_str().expect("utf8")])
            .await;
    let declaration = work.path().join("images.toml");
    std::fs::write(
        &declaration,
        format!(
            "[registries.bench]\nurl = \"http://{}\"\ninsecure = true\nusername = \"{}\"\npassword_file = \"{}\"\n\
             [images.\"big:1\"]\ntypes = [\"BATCH\"]\nref = \"bench/bench/big:1\"\n\
             [images.\"host:1\"]\ntypes = [\"BATCH\"]\n",
            r.host,
            registry::USER,
            password.display()
        ),
    )
    .expect("a declaration");
    server.apply(&declaration);
    let first = run_once(&server, "big:1", "cold").await;
    let (mut warm, mut host) = (Vec::new(), Vec::new());
    for n in 0..LAUNCHES * runs() {
        warm.push(run_once(&server, "big:1", &format!("warm-{n}")).await);
        host.push(run_once(&server, "host:1", &format!("host-{n}")).await);
    }
    println!();
    println!(
        "Launch to RUNNING (batch `true`, creation to the RUNNING transition, {} each, alternating):\n",
        warm.len()
    );
    println!("| image | p50 ms | p90 ms |");
    println!("|---|---|---|");
    println!("| OCI image, cold (the first: pulled) | {first:.0} | |");
    println!("| OCI image, warm | {:.0} | {:.0} |", percentile(warm.clone(), 0.5), percentile(warm.clone(), 0.9));
    println!("| host root | {:.0} | {:.0} |", percentile(host.clone(), 0.5), percentile(host.clone(), 0.9));
    println!();
    println!("- warm OCI image ÷ host root, p50: **{:.2}**", percentile(warm, 0.5) / percentile(host, 0.5));
    drop(server);
    for d in std::fs::read_dir(runtime.join("sessions")).into_iter().flatten().flatten() {
        std::fs::write(d.path().join("stop"), b"").ok();
    }
}
