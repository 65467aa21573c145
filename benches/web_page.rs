//! The Sessions page in a real browser (Debian's chromium, driven by playwright-core with
//! `tests/browser/measure_page.mjs`), on a release server (its own process, loopback) with
//! the demo data:
//! - the first load of a signed-in user: bytes transferred and the time from navigation to
//!   the first rows, over several fresh tabs;
//! - a page left open while sessions change (one launched and one terminated every few
//!   seconds through the API): the page's JS heap and DOM nodes at the start, at their
//!   largest and at the end (after a garbage collection), and the server's memory.
//!
//! `cargo bench --bench web_page [-- --loads N --seconds S --every-ms MS --backend sqlite|postgres]`
//! (defaults: 5 loads, 600 s, 3 000 ms, SQLite). Needs `npm ci` in `tests/browser`.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use serde_json::Value;
use support::{Server, stamp};

fn flag(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

#[tokio::main]
async fn main() {
    let loads = flag("--loads").unwrap_or_else(|| "5".into());
    let seconds = flag("--seconds").unwrap_or_else(|| "600".into());
    let every = flag("--every-ms").unwrap_or_else(|| "3000".into());
    let backend = flag("--backend").unwrap_or_else(|| "sqlite".into());
    stamp(&format!(
        "cargo bench --bench web_page -- --loads {loads} --seconds {seconds} --every-ms {every} --backend {backend}"
    ));
    let server = Server::start(&backend, &[]).await;
    let rss_before = server.rss_kib();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let out = tokio::process::Command::new("node")
        .arg("measure_page.mjs")
        .args([format!("http://{}", server.base), "demo-alice".into(), loads, seconds.clone(), every])
        .current_dir(&dir)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the browser ran: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let rss_after = server.rss_kib();

    let loads = r["loads"].as_array().expect("loads");
    let mut ms: Vec<f64> = loads.iter().filter_map(|l| l["firstRowsMs"].as_f64()).collect();
    ms.sort_by(f64::total_cmp);
    let bytes: Vec<f64> = loads.iter().filter_map(|l| l["transferred"].as_f64()).collect();
    println!("| first load ({backend}) | runs | time to first rows, ms (median; each) | bytes transferred |");
    println!("|---|---|---|---|");
    println!(
        "| signed-in tab, `/project/default/session` | {} | {:.0} ({}) | {:.0} |",
        ms.len(),
        ms[ms.len() / 2],
        ms.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>().join(" / "),
        bytes.iter().copied().fold(0.0, f64::max)
    );
    println!();
    let s = &r["soak"];
    let mib = |v: &Value| v.as_f64().unwrap_or(0.0) / 1024.0 / 1024.0;
    println!(
        "| page open {seconds} s | launched / terminated | JS heap MiB start / largest / end | DOM nodes start / largest / end | rows shown | server RSS MiB before / after |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| alice, Running tab | {} / {} | {:.2} / {:.2} / {:.2} | {} / {} / {} | {} | {:.0} / {:.0} |",
        s["launched"],
        s["terminated"],
        mib(&s["start"]["heap"]),
        mib(&s["largest"]["heap"]),
        mib(&s["end"]["heap"]),
        s["start"]["nodes"],
        s["largest"]["nodes"],
        s["end"]["nodes"],
        s["rowsShown"],
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0
    );
}
