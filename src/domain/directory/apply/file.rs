//! Reading declaration files: TOML, one file or a directory of `*.toml` files read as one.
//! Every problem is collected (unknown keys, wrong types, bad values, references to what is
//! not declared, names declared twice) with its file, line and key, so that one run shows
//! them all; nothing is read from the database but the known slot names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::reader::{Entry, Problem, Reader, Ref, Source, Table, quoted};

use super::Declared;
use super::sections::{
    AGENT_ENGINE, read_agent, read_domain, read_engine, read_group, read_image, read_local, read_policy, read_project,
    read_registry, read_storage, read_user,
};
use crate::domain::runtime::engines::EngineKind;
use crate::domain::runtime::environments::{Images, LocalImage};

/// The largest declaration read (a file, or all files of a directory together).
const MAX_BYTES: u64 = 8 << 20;

/// The sources at `path`: the file itself, or every `*.toml` file of the directory in name
/// order.
pub fn sources(path: &Path) -> Result<Vec<Source>, String> {
    let read =
        |p: &Path| -> Result<Source, String> { Ok(Source { name: p.display().to_string(), text: read_text(p)? }) };
    if !path.is_dir() {
        return Ok(vec![read(path)?]);
    }
    let mut files: Vec<_> = std::fs::read_dir(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("{} holds no *.toml file", path.display()));
    }
    let sources = files.iter().map(|p| read(p)).collect::<Result<Vec<_>, _>>()?;
    if sources.iter().map(|s| s.text.len() as u64).sum::<u64>() > MAX_BYTES {
        return Err(format!("the files of {} are larger than {MAX_BYTES} bytes together", path.display()));
    }
    Ok(sources)
}

/// The text of the declaration file at `p`: a regular file (not a device, a FIFO or a
/// directory) of at most [`MAX_BYTES`], of which at most one byte more is read.
pub fn read_text(p: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", p.display());
    // Without blocking: opening a FIFO would wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(p)
        .map_err(cannot)?;
    if !file.metadata().map_err(cannot)?.is_file() {
        return Err(format!("{} is not a regular file", p.display()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("{} is larger than {MAX_BYTES} bytes", p.display()));
    }
    String::from_utf8(bytes).map_err(|_| format!("cannot read {}: it is not UTF-8 text", p.display()))
}

const SECTIONS: &[&str] = &[
    "domains",
    "projects",
    "users",
    "keypair_policies",
    "engines",
    "resource_groups",
    "agents",
    "registries",
    "storage",
    "images",
];

/// Reads `sources` as one declaration. `known_slots` are the slot names limits may use.
pub fn parse(sources: &[Source], known_slots: &BTreeSet<String>) -> Result<Declared, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut declared = Declared::default();
    // Where each name was first declared, per section, for "declared twice".
    let mut seen: BTreeMap<(&str, String), (String, usize)> = BTreeMap::new();
    // References to check once every file is read: (what, name, where).
    let mut refs: Vec<Ref> = Vec::new();
    for source in sources {
        let (doc, errors) = DeTable::parse_recoverable(&source.text);
        let mut r = Reader::new(source, &mut problems, known_slots);
        for e in errors {
            let line = e.span().map_or(1, |s| r.line(s.start));
            r.problem_at(line, "", format!("not valid TOML: {}", e.message()));
        }
        for (key, value) in in_file_order(doc.get_ref()) {
            let Some(&section) = SECTIONS.iter().find(|s| **s == key.get_ref().as_ref()) else {
                let message = format!("unknown section; the sections are {}", SECTIONS.join(", "));
                r.problem(key.span(), key.get_ref(), message);
                continue;
            };
            let Some(entries) = r.table(section, value) else { continue };
            for (name, entry) in in_file_order(entries) {
                let name_text = name.get_ref().as_ref().to_owned();
                let path = format!("{section}.{}", quoted(&name_text));
                let identity = if section == "users" { name_text.to_lowercase() } else { name_text.clone() };
                let line = r.line(name.span().start);
                if name_text.trim().is_empty() || name_text.chars().any(char::is_control) {
                    r.problem_at(line, &path, "a name has at least one character and no control characters".to_owned());
                    continue;
                }
                if section == "domains" && name_text.contains('/') {
                    r.problem_at(line, &path, "a domain's name has no `/` (projects are named DOMAIN/NAME)".to_owned());
                    continue;
                }
                if let Some((file, first)) = seen.get(&(section, identity.clone())) {
                    r.problem_at(line, &path, format!("declared again (first at {file}:{first})"));
                    continue;
                }
                seen.insert((section, identity.clone()), (source.name.clone(), line));
                let Some(fields) = r.table(&path, entry) else { continue };
                let mut e = Entry { r: &mut r, path, fields, line };
                match section {
                    "domains" => read_domain(&mut e, &name_text, &mut declared),
                    "projects" => read_project(&mut e, &name_text, &mut declared, &mut refs),
                    "users" => read_user(&mut e, &identity, &mut declared, &mut refs),
                    "keypair_policies" => read_policy(&mut e, &name_text, &mut declared),
                    "engines" => read_engine(&mut e, &name_text, &mut declared),
                    "resource_groups" => read_group(&mut e, &name_text, &mut declared, &mut refs),
                    "agents" => read_agent(&mut e, &name_text, &mut declared, &mut refs),
                    "registries" => read_registry(&mut e, &name_text, &mut declared),
                    "storage" => read_storage(&mut e, &name_text, &mut declared, &mut refs),
                    _ => read_image(&mut e, &name_text, &mut declared, &mut refs),
                }
            }
        }
    }
    check_references(&declared, refs, &mut problems);
    let order = |p: &Problem| (sources.iter().position(|s| s.name == p.file), p.line);
    problems.sort_by_key(|p| order(p));
    if problems.is_empty() { Ok(declared) } else { Err(problems) }
}

/// A table's entries in the order the file has them (the parser keeps them by name).
fn in_file_order<'v, 't>(table: &'v Table<'t>) -> Vec<(&'v Spanned<toml::de::DeString<'t>>, &'v Spanned<DeValue<'t>>)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    entries
}

fn check_references(declared: &Declared, refs: Vec<Ref>, problems: &mut Vec<Problem>) {
    for r in refs {
        if r.section == AGENT_ENGINE {
            // An agent with slots runs on its group's engine: one must be named, and it must
            // be one whose agents are declared (a Slurm group's agents are its nodes).
            let Some(group) = declared.groups.get(&r.name) else { continue };
            let engine = group.engine.as_ref().and_then(|e| declared.engines.get(e).map(|d| (e, d.settings.kind())));
            let message = match engine {
                None if group.engine.is_none() => Some(format!(
                    "resource group {} names no engine, so nothing would run this agent's sessions; \
                     give the group `engine = \"NAME\"` and declare [engines.NAME]",
                    quoted(&r.name)
                )),
                Some((name, EngineKind::Slurm)) => Some(format!(
                    "resource group {} runs on the Slurm engine {}, whose agents are its partition's nodes, \
                     discovered; declare none",
                    quoted(&r.name),
                    quoted(name)
                )),
                _ => None,
            };
            if let Some(message) = message {
                problems.push(Problem { file: r.file, line: r.line, key: r.key, message });
            }
            continue;
        }
        let found = match r.section {
            "engines" => declared.engines.contains_key(&r.name),
            "registries" => declared.registries.contains_key(&r.name),
            "domains" => declared.domains.contains_key(&r.name),
            "projects" => declared.projects.contains_key(&r.name),
            "keypair_policies" => declared.policies.contains_key(&r.name),
            _ => declared.groups.contains_key(&r.name),
        };
        if !found {
            problems.push(Problem {
                file: r.file,
                line: r.line,
                key: r.key,
                message: format!("{} {} is not declared (in [{}])", r.what, quoted(&r.name), r.section),
            });
        }
    }
    let mut secrets: BTreeMap<&str, &str> = BTreeMap::new();
    let mut access_keys: BTreeMap<&str, &str> = BTreeMap::new();
    for (email, user) in &declared.users {
        for k in &user.keypairs {
            if let Some(other) = secrets.insert(&k.secret_hash, &k.access_key) {
                problems.push(Problem {
                    file: user.file.clone(),
                    line: user.line,
                    key: format!("users.{}.keypairs", quoted(email)),
                    message: format!("keypair {} has the secret of keypair {other}; each needs its own", k.access_key),
                });
            }
            if let Some(other) = access_keys.insert(&k.access_key, email) {
                problems.push(Problem {
                    file: user.file.clone(),
                    line: user.line,
                    key: format!("users.{}.keypairs", quoted(email)),
                    message: format!("access key {} is declared again (also for {other})", k.access_key),
                });
            }
        }
    }
}

/// The local environments of a file given with `--images-file`: its `[images]` section,
/// read as `apply` reads it (the other sections are `apply`'s). The error names the file,
/// the line and the key of every problem.
pub fn images_file(path: &Path) -> Result<Images, String> {
    let text = read_text(path)?;
    images_text(&path.display().to_string(), &text)
}

/// The same from a file's text.
pub fn images_text(name: &str, text: &str) -> Result<Images, String> {
    let source = Source { name: name.to_owned(), text: text.to_owned() };
    local_images(&source)
        .map(|images| Images { images, registries: BTreeMap::new(), apps: BTreeMap::new() })
        .map_err(|problems| problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))
}

/// The local environments declared in one file's `[images]` section (`--images-file`):
/// read as `apply` reads them; the image's other keys and the other sections are `apply`'s.
pub fn local_images(source: &Source) -> Result<BTreeMap<String, LocalImage>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = BTreeMap::new();
    let (doc, errors) = DeTable::parse_recoverable(&source.text);
    let none = BTreeSet::new();
    let mut r = Reader::new(source, &mut problems, &none);
    for e in errors {
        let line = e.span().map_or(1, |s| r.line(s.start));
        r.problem_at(line, "", format!("not valid TOML: {}", e.message()));
    }
    for (key, value) in doc.get_ref() {
        let section = key.get_ref().as_ref();
        if !SECTIONS.contains(&section) {
            r.problem(key.span(), section, format!("unknown section; the sections are {}", SECTIONS.join(", ")));
        }
        if section != "images" {
            continue;
        }
        let Some(entries) = r.table(section, value) else { continue };
        for (name, entry) in entries {
            let path = format!("images.{}", quoted(name.get_ref()));
            let line = r.line(name.span().start);
            let Some(fields) = r.table(&path, entry) else { continue };
            let mut e = Entry { r: &mut r, path, fields, line };
            e.only(super::keys::IMAGE_KEYS);
            out.insert(name.get_ref().as_ref().to_owned(), read_local(&mut e));
        }
    }
    if problems.is_empty() { Ok(out) } else { Err(problems) }
}

#[cfg(test)]
mod tests {
    use super::super::reader::bytes;
    use super::*;

    #[test]
    fn an_images_file_reads_and_names_its_mistakes() {
        let dir = tempfile::tempdir().expect("a root");
        let root = dir.path().display().to_string();
        let images = images_text(
            "f.toml",
            &format!("[images.\"python:3.12\"]\nprepare = \"python3 --version\"\nenv = {{ A = \"1\" }}\n[images.\"x\"]\nroot = \"{root}\"\n"),
        )
        .expect("valid");
        assert_eq!(images.get("python:3.12").prepare.as_deref(), Some("python3 --version"));
        assert_eq!(images.get("python:3.12").env["A"], "1");
        assert_eq!(images.get("x").root_dir(), Some(std::path::PathBuf::from(&root)));
        // Never the host's whole file system, nor a directory that is not there.
        let e = images_text("f.toml", "[images.a]\nroot = \"/\"\n").expect_err("the host's root");
        assert!(e.contains("may not be /"), "{e}");
        let e = images_text("f.toml", "[images.a]\nroot = \"/usr/..\"\n").expect_err("the host's root again");
        assert!(e.contains("may not be /"), "{e}");
        let e = images_text("f.toml", "[images.a]\nroot = \"/no/such/root\"\n").expect_err("missing");
        assert!(e.contains("not a directory"), "{e}");
        // Variable names as a launch takes them.
        for bad in ["\"A=B\"", "\"\"", "\"1X\"", "\"A\\u0000\""] {
            let e = images_text("f.toml", &format!("[images.a]\nenv = {{ {bad} = \"x\" }}\n")).expect_err(bad);
            assert!(e.contains("is not a variable name"), "{bad}: {e}");
        }
        let e = images_text("f.toml", "[images.a]\nenv = { A = \"x\\u0000y\" }\n").expect_err("NUL in a value");
        assert!(e.contains("NUL"), "{e}");
        assert_eq!(images.get("unknown"), LocalImage::default(), "an image without an entry runs on the host");
        assert_eq!(images.get("unknown").interactive_command(), crate::domain::runtime::environments::KEEP_RUNNING);

        let e = images_text("f.toml", "[images.a]\nroot = \"host\"\nprepared = \"x\"\n").expect_err("unknown key");
        assert!(e.starts_with("f.toml:3: images.a.prepared: unknown key"), "{e}");
        let e = images_text("f.toml", "[images.a]\nroot = \"relative\"\n").expect_err("relative root");
        assert!(e.contains("absolute"), "{e}");
        let full = images_text("f.toml", "[domains.d]\n[images.a]\ntypes = [\"BATCH\"]\nprepare = \"true\"\n");
        assert_eq!(full.expect("a declaration file serves").get("a").prepare.as_deref(), Some("true"));
    }
    use crate::domain::model::{Role, SessionType};
    use crate::domain::runtime::engines::{EngineSettings, TokenSource};

    fn known() -> BTreeSet<String> {
        ["cpu", "mem", "cuda.device"].into_iter().map(String::from).collect()
    }

    fn read(text: &str) -> Result<Declared, Vec<Problem>> {
        parse(&[Source { name: "team.toml".to_owned(), text: text.to_owned() }], &known())
    }

    #[test]
    fn sizes_read_as_bytes() {
        assert_eq!(bytes("64 GiB"), Some(64.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(bytes("512MiB"), Some(512.0 * 1024.0 * 1024.0));
        assert_eq!(bytes("1.5 G"), Some(1.5 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(bytes("2 GB"), Some(2e9));
        assert_eq!(bytes("1000"), Some(1000.0));
        assert_eq!(bytes("lots"), None);
        assert_eq!(bytes("3 parsecs"), None);
    }

    #[test]
    fn every_problem_is_reported_with_its_line_and_key() {
        let problems = read(
            "[domains.acme]\nlimits = { cpu = -1 }\n\n\
             [projects.\"nowhere/ml\"]\nresource_groups = [\"gpu\"]\n\n\
             [users.\"a@acme.io\"]\ndomain = \"acme\"\nrole = \"owner\"\ncolour = \"blue\"\n\n\
             [users.\"A@acme.io\"]\ndomain = \"acme\"\n",
        )
        .expect_err("invalid");
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let expect = [
            "team.toml:2: domains.acme.limits.cpu: must not be negative, not -1",
            "team.toml:9: users.\"a@acme.io\".role: unknown role \"owner\"",
            "team.toml:10: users.\"a@acme.io\".colour: unknown key",
            "team.toml:12: users.\"A@acme.io\": declared again (first at team.toml:7)",
            "team.toml:4: projects.\"nowhere/ml\": domain nowhere is not declared",
            "team.toml:5: projects.\"nowhere/ml\".resource_groups: resource group gpu is not declared",
        ];
        for e in expect {
            assert!(shown.iter().any(|s| s.starts_with(e)), "{e:?} not in {shown:#?}");
        }
        assert_eq!(shown.len(), expect.len(), "{shown:#?}");
    }

    #[test]
    fn engines_are_declared_and_agents_need_one() {
        let problems = read(
            "[engines.bad]\nkind = \"slurm\"\nurl = \"127.0.0.1:6820\"\npartition = \"batch\"\nuser = \"svc\"\n\
             output_dir = \"/shared/out\"\nrelay_bind = \"node-1\"\n\n\
             [engines.sim]\nkind = \"simulated\"\nurl = \"x\"\n\n\
             [engines.hpc]\nkind = \"slurm\"\nurl = \"http://rest:6820\"\npartition = \"batch\"\nuser = \"svc\"\n\
             token_file = \"/etc/jwt\"\noutput_dir = \"/shared/out\"\n\n\
             [resource_groups.plain]\n\n\
             [resource_groups.cluster]\nengine = \"hpc\"\n\n\
             [resource_groups.lost]\nengine = \"nowhere\"\n\n\
             [agents.a1]\nresource_group = \"plain\"\nslots = { cpu = 1 }\n\n\
             [agents.n1]\nresource_group = \"cluster\"\nslots = { cpu = 1 }\n",
        )
        .expect_err("invalid");
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let expect = [
            "team.toml:1: engines.bad: a Slurm engine needs token_file or token_env",
            "team.toml:3: engines.bad.url: slurmrestd's URL starts with http:// or https://",
            "team.toml:7: engines.bad.relay_bind: an IP address for every node to listen on",
            "team.toml:11: engines.sim.url: unknown key",
            "team.toml:27: resource_groups.lost.engine: engine nowhere is not declared",
            "team.toml:30: agents.a1.resource_group: resource group plain names no engine",
            "team.toml:34: agents.n1.resource_group: resource group cluster runs on the Slurm engine hpc",
        ];
        for e in expect {
            assert!(shown.iter().any(|s| s.starts_with(e)), "{e:?} not in {shown:#?}");
        }
        assert_eq!(shown.len(), expect.len(), "{shown:#?}");

        let d = read(
            "[engines.hpc]\nkind = \"SLURM\"\nurl = \"http://rest:6820/\"\npartition = \"gpu\"\nuser = \"svc\"\n\
             token_env = \"SLURM_JWT\"\noutput_dir = \"/shared/out\"\nrelay_bind = \"::\"\n\
             [resource_groups.cluster]\nengine = \"hpc\"\n",
        )
        .expect("valid");
        let EngineSettings::Slurm(s) = &d.engines["hpc"].settings else { panic!("a Slurm engine") };
        assert_eq!((s.url.as_str(), s.partition.as_str()), ("http://rest:6820", "gpu"));
        assert_eq!(s.token, TokenSource::Env("SLURM_JWT".into()), "where the token is, never the token");
        assert_eq!(s.relay_bind.as_deref(), Some("::"));
        assert_eq!(d.groups["cluster"].engine.as_deref(), Some("hpc"));
    }

    #[test]
    fn idle_checks_need_a_timeout_and_something_that_counts_as_activity() {
        let problems = read(
            "[keypair_policies.a]\nidle_timeout_seconds = 600\n\n\
             [keypair_policies.b]\nidle_utilization = { cpu = 0.05 }\n\n\
             [keypair_policies.c]\nidle_counts_terminal = true\n\n\
             [keypair_policies.d]\nidle_timeout_seconds = 0\nidle_utilization = { gpu = 1 }\n",
        )
        .expect_err("invalid");
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let expect = [
            "team.toml:2: keypair_policies.a.idle_timeout_seconds: needs idle_utilization or idle_counts_terminal",
            "team.toml:5: keypair_policies.b.idle_utilization: needs idle_timeout_seconds",
            "team.toml:8: keypair_policies.c.idle_counts_terminal: needs idle_timeout_seconds",
            "team.toml:11: keypair_policies.d.idle_timeout_seconds:",
            "team.toml:12: keypair_policies.d.idle_utilization.gpu: unknown slot",
        ];
        for e in expect {
            assert!(shown.iter().any(|s| s.starts_with(e)), "{e:?} not in {shown:#?}");
        }
        let d = read(
            "[keypair_policies.p]\nidle_timeout_seconds = 600\nidle_utilization = { cpu = 0.05, mem = \"1 GiB\" }\n\
             idle_counts_terminal = true\n",
        )
        .expect("valid");
        let p = &d.policies["p"];
        assert_eq!((p.idle_timeout_seconds, p.idle_counts_terminal), (Some(600), true));
        assert_eq!(p.idle_utilization.to_json(), serde_json::json!({"cpu": 0.05, "mem": 1073741824_i64}));
    }

    #[test]
    fn a_valid_declaration_reads_with_its_defaults() {
        let d = read(
            "[domains.acme]\n[projects.\"acme/ml\"]\nresource_groups = [\"gpu\"]\n\
             [resource_groups.gpu]\n[keypair_policies.default]\nlimits = { mem = \"8 GiB\" }\n\
             [users.\"Ann@Acme.io\"]\ndomain = \"acme\"\nprojects = [\"ml\"]\n\
             keypairs = [{ access_key = \"AKANN\", secret = \"s3cret\" }]\n\
             [agents.here]\nresource_group = \"gpu\"\nthis_machine = true\n\
             [images.\"python:3.12\"]\ntypes = [\"batch\"]\nprepare = \"python3 --version\"\n",
        )
        .expect("valid");
        let ann = &d.users["ann@acme.io"];
        assert_eq!((ann.role, ann.full_name.as_str()), (Role::User, "Ann"));
        assert_eq!(ann.keypairs[0].policy, "default");
        assert_eq!(d.policies["default"].limits.get("mem"), 8.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(d.groups["gpu"].session_types, SessionType::ALL.to_vec());
        assert_eq!(d.agents["here"].slots, None, "this machine's capacity is detected");
        assert_eq!(d.images["python:3.12"].types, vec![SessionType::Batch]);
        assert_eq!(
            d.images["python:3.12"].local.as_ref().and_then(|l| l.prepare.as_deref()),
            Some("python3 --version")
        );
    }

    #[test]
    fn odd_values_are_problems_not_panics_or_nulls() {
        let huge = format!("1{} TiB", "0".repeat(400));
        let text = format!(
            "[domains.\"a/b\"]\n[domains.\"\"]\n[domains.ok]\nlimits = {{ mem = \"{huge}\", cuda.device = 1 }}\n\
             [keypair_policies.p]\nmax_concurrent_sessions = 3000000000\n\
             [resource_groups.g]\nsession_types = [\"batch\", \"BATCH\"]\ndescription = \"a\\u0000b\"\n\
             [agents.m1]\nresource_group = \"g\"\nthis_machine = true\n\
             [agents.m2]\nresource_group = \"g\"\nthis_machine = true\n"
        );
        let shown: Vec<String> = read(&text).expect_err("invalid").iter().map(ToString::to_string).collect();
        let expect = [
            "team.toml:1: domains.\"a/b\": a domain's name has no `/`",
            "team.toml:2: domains.\"\": a name has at least one character",
            "team.toml:4: domains.ok.limits.mem: expected a number of bytes",
            "team.toml:4: domains.ok.limits.cuda: unknown slot (quote a dotted name",
            "team.toml:6: keypair_policies.p.max_concurrent_sessions: must be between 0 and 2147483647",
            "team.toml:8: resource_groups.g.session_types: \"BATCH\" is listed twice",
            "team.toml:9: resource_groups.g.description: has a NUL character",
            "team.toml:15: agents.m2.this_machine: one agent at most is this machine, and m1 is",
        ];
        for e in expect {
            assert!(shown.iter().any(|s| s.starts_with(e)), "{e:?} not in {shown:#?}");
        }
        assert_eq!(shown.len(), expect.len(), "{shown:#?}");
    }

    #[test]
    fn names_across_files_are_one_namespace() {
        let a = Source { name: "a.toml".to_owned(), text: "[domains.acme]\n".to_owned() };
        let b = Source { name: "b.toml".to_owned(), text: "\n[domains.acme]\n".to_owned() };
        let problems = parse(&[a, b], &known()).expect_err("twice");
        assert_eq!(problems[0].to_string(), "b.toml:2: domains.acme: declared again (first at a.toml:1)");
    }
}
