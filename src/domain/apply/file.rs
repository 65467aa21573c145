//! Reading declaration files: TOML, one file or a directory of `*.toml` files read as one.
//! Every problem is collected (unknown keys, wrong types, bad values, references to what is
//! not declared, names declared twice) with its file, line and key, so that one run shows
//! them all; nothing is read from the database but the known slot names.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::reader::{Entry, Reader, Table, quoted};

use super::{AgentDecl, Declared, DomainDecl, GroupDecl, ImageDecl, KeypairDecl, PolicyDecl, ProjectDecl, UserDecl};
use crate::domain::model::{Role, SchedulerStrategy, SessionType};
use crate::domain::runtime::local::images::LocalImage;

/// One declaration file's text and the name its problems are reported under.
pub struct Source {
    pub name: String,
    pub text: String,
}

/// What is wrong in a declaration, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    /// The key path, e.g. `users."alice@example.com".role`.
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}:{}: {}: {}", self.file, self.line, self.key, self.message)
        }
    }
}

/// The largest declaration read (a file, or all files of a directory together).
const MAX_BYTES: u64 = 8 << 20;

/// The sources at `path`: the file itself, or every `*.toml` file of the directory in name
/// order.
pub fn sources(path: &Path) -> Result<Vec<Source>, String> {
    let read = |p: &Path| -> Result<Source, String> {
        let meta = std::fs::metadata(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        if meta.len() > MAX_BYTES {
            return Err(format!("{} is larger than {MAX_BYTES} bytes", p.display()));
        }
        let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        Ok(Source { name: p.display().to_string(), text })
    };
    if !path.is_dir() {
        return Ok(vec![read(path)?]);
    }
    let mut files: Vec<_> = std::fs::read_dir(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
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

const SECTIONS: &[&str] = &["domains", "projects", "users", "keypair_policies", "resource_groups", "agents", "images"];

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
        let mut r = Reader { source, problems: &mut problems, known_slots };
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
                    "resource_groups" => read_group(&mut e, &name_text, &mut declared),
                    "agents" => read_agent(&mut e, &name_text, &mut declared, &mut refs),
                    _ => read_image(&mut e, &name_text, &mut declared),
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

/// A name one entry refers to, checked once every file is read.
pub(super) struct Ref {
    pub(super) section: &'static str,
    pub(super) name: String,
    pub(super) file: String,
    pub(super) line: usize,
    pub(super) key: String,
    pub(super) what: &'static str,
}

fn check_references(declared: &Declared, refs: Vec<Ref>, problems: &mut Vec<Problem>) {
    for r in refs {
        let found = match r.section {
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

fn read_domain(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    e.only(&["limits"]);
    let limits = e.slots("limits");
    declared.domains.insert(name.to_owned(), DomainDecl { limits });
}

fn read_project(e: &mut Entry<'_, '_, '_, '_>, key: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    e.only(&["limits", "resource_groups"]);
    let limits = e.slots("limits");
    let groups = e.strings("resource_groups").unwrap_or_default();
    let Some((domain, name)) = key.split_once('/').filter(|(d, n)| !d.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        let (line, path) = (e.line, e.path.clone());
        e.r.problem_at(line, &path, "a project is named \"DOMAIN/NAME\"".to_owned());
        return;
    };
    refs.push(Ref {
        section: "domains",
        name: domain.to_owned(),
        file: e.r.source.name.clone(),
        line: e.line,
        key: e.path.clone(),
        what: "domain",
    });
    for (g, span) in &groups {
        e.reference(refs, "resource_groups", span.clone(), "resource_groups", g.clone(), "resource group");
    }
    declared.projects.insert(
        key.to_owned(),
        ProjectDecl {
            domain: domain.to_owned(),
            name: name.to_owned(),
            limits,
            resource_groups: groups.into_iter().map(|(g, _)| g).collect(),
        },
    );
}

fn read_user(e: &mut Entry<'_, '_, '_, '_>, email: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    e.only(&["domain", "role", "name", "projects", "keypairs"]);
    let at = email.find('@');
    if !at.is_some_and(|i| i > 0 && i + 1 < email.len()) || email.chars().any(|c| c.is_whitespace() || c.is_control()) {
        let (line, path) = (e.line, e.path.clone());
        e.r.problem_at(line, &path, "is not an email address".to_owned());
    }
    let domain = e.required_string("domain");
    let role = match e.string("role") {
        None => Some(Role::User),
        Some(text) => {
            let role = Role::parse(&text.to_uppercase());
            if role.is_none() {
                let span = e.span_of("role");
                e.bad("role", span, format!("unknown role {text:?}; the roles are USER, ADMIN, SUPERADMIN"));
            }
            role
        }
    };
    let full_name = e.string("name").unwrap_or_else(|| default_name(email));
    let projects = e.strings("projects").unwrap_or_default();
    let keypairs = read_keypairs(e, refs);
    let Some(domain) = domain else { return };
    let span = e.span_of("domain");
    e.reference(refs, "domain", span, "domains", domain.clone(), "domain");
    for (p, span) in &projects {
        e.reference(refs, "projects", span.clone(), "projects", format!("{domain}/{p}"), "project");
    }
    let file = e.r.source.name.clone();
    declared.users.insert(
        email.to_owned(),
        UserDecl {
            domain,
            full_name,
            role: role.unwrap_or(Role::User),
            projects: projects.into_iter().map(|(p, _)| p).collect(),
            keypairs,
            file,
            line: e.line,
        },
    );
}

fn read_keypairs(e: &mut Entry<'_, '_, '_, '_>, refs: &mut Vec<Ref>) -> Vec<KeypairDecl> {
    let mut out = Vec::new();
    let Some(v) = e.value("keypairs") else { return out };
    let DeValue::Array(items) = v.get_ref() else {
        e.bad("keypairs", v.span(), format!("expected an array of tables, found {}", v.get_ref().type_str()));
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let DeValue::Table(fields) = item.get_ref() else {
            e.bad("keypairs", item.span(), format!("expected a table, found {}", item.get_ref().type_str()));
            continue;
        };
        let line = e.r.line(item.span().start);
        let path = format!("{}.keypairs[{i}]", e.path);
        let mut k = Entry { r: &mut *e.r, path, fields, line };
        k.only(&["access_key", "policy", "secret", "secret_sha256"]);
        let access_key = k.required_string("access_key");
        let policy = match k.value("policy") {
            None => Some("default".to_owned()),
            Some(_) => k.string("policy"),
        };
        if let Some(policy) = &policy {
            let span = if k.value("policy").is_some() { k.span_of("policy") } else { item.span() };
            k.reference(refs, "policy", span, "keypair_policies", policy.clone(), "keypair policy");
        }
        let secret = k.value("secret").map(|_| k.string("secret"));
        let sha = k.value("secret_sha256").map(|_| k.string("secret_sha256"));
        let hash = match (secret, sha) {
            (Some(Some(secret)), None) if !secret.is_empty() => Some(crate::domain::auth::hash_token(&secret)),
            (None, Some(Some(hash))) if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Some(hash.to_ascii_lowercase())
            }
            (None, Some(Some(_))) => {
                let span = k.span_of("secret_sha256");
                k.bad("secret_sha256", span, "expected 64 hexadecimal digits".to_owned());
                None
            }
            // Not a string: said already.
            (Some(None), None) | (None, Some(None)) => None,
            _ => {
                let (line, path) = (k.line, k.path.clone());
                k.r.problem_at(line, &path, "needs exactly one of secret, secret_sha256 (not empty)".to_owned());
                None
            }
        };
        if let Some(access_key) = &access_key
            && (access_key.is_empty() || access_key.chars().any(|c| !c.is_ascii_alphanumeric()))
        {
            let span = k.span_of("access_key");
            k.bad("access_key", span, "is letters and digits only".to_owned());
            continue;
        }
        if let (Some(access_key), Some(secret_hash), Some(policy)) = (access_key, hash, policy) {
            out.push(KeypairDecl { access_key, policy, secret_hash });
        }
    }
    out
}

/// "alice.smith@…" → "Alice.smith": the name shown when none is declared.
pub fn default_name(email: &str) -> String {
    let local = email.split('@').next().unwrap_or(email);
    let mut chars = local.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

fn read_policy(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    e.only(&["limits", "max_concurrent_sessions", "max_pending_sessions", "max_session_lifetime_seconds"]);
    let limits = e.slots("limits");
    let most = i64::from(i32::MAX);
    let concurrent = e.integer("max_concurrent_sessions", 0, most).unwrap_or(super::DEFAULT_CONCURRENT);
    let pending = e.integer("max_pending_sessions", 0, most).unwrap_or(super::DEFAULT_PENDING);
    let lifetime = e.integer("max_session_lifetime_seconds", 1, i64::MAX);
    let clamp = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
    declared.policies.insert(
        name.to_owned(),
        PolicyDecl {
            limits,
            max_concurrent_sessions: clamp(concurrent),
            max_pending_sessions: clamp(pending),
            max_session_lifetime_seconds: lifetime,
        },
    );
}

fn read_group(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    e.only(&["description", "scheduler", "pending_timeout_seconds", "session_types"]);
    let description = e.string("description").unwrap_or_default();
    let scheduler = match e.string("scheduler") {
        None => SchedulerStrategy::Fifo,
        Some(text) => SchedulerStrategy::parse(&text.to_uppercase()).unwrap_or_else(|| {
            let span = e.span_of("scheduler");
            e.bad("scheduler", span, format!("unknown scheduler {text:?}; the schedulers are FIFO, LIFO, DRF"));
            SchedulerStrategy::Fifo
        }),
    };
    let pending_timeout_seconds = e.integer("pending_timeout_seconds", 1, i64::MAX);
    let session_types = e.session_types("session_types").unwrap_or_else(|| SessionType::ALL.to_vec());
    declared
        .groups
        .insert(name.to_owned(), GroupDecl { description, scheduler, pending_timeout_seconds, session_types });
}

fn read_agent(e: &mut Entry<'_, '_, '_, '_>, id: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    e.only(&["resource_group", "slots", "this_machine", "schedulable"]);
    let this_machine = e.boolean("this_machine", false);
    let schedulable = e.boolean("schedulable", true);
    let slots = e.slots("slots");
    match (this_machine, e.value("slots").is_some()) {
        (true, true) => {
            let span = e.span_of("slots");
            e.bad("slots", span, "this machine's capacity is detected; declare no slots".to_owned());
        }
        (false, false) => e.missing("slots"),
        _ => {}
    }
    if this_machine && let Some((other, _)) = declared.agents.iter().find(|(_, a)| a.slots.is_none()) {
        let message = format!("one agent at most is this machine, and {other} is");
        let span = e.span_of("this_machine");
        e.bad("this_machine", span, message);
    }
    let Some(group) = e.required_string("resource_group") else { return };
    let span = e.span_of("resource_group");
    e.reference(refs, "resource_group", span, "resource_groups", group.clone(), "resource group");
    declared.agents.insert(
        id.to_owned(),
        AgentDecl { resource_group: group, slots: (!this_machine).then_some(slots), schedulable },
    );
}

const IMAGE_KEYS: &[&str] = &["types", "minimum", "apps", "root", "command", "prepare", "env"];

fn read_image(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    e.only(IMAGE_KEYS);
    let types = if e.value("types").is_none() {
        e.missing("types");
        None
    } else {
        e.session_types("types")
    };
    let minimum = e.slots("minimum");
    let apps = e.strings("apps").unwrap_or_default();
    let local = read_local(e);
    let Some(types) = types else { return };
    declared.images.insert(
        name.to_owned(),
        ImageDecl {
            types,
            minimum,
            apps: apps.into_iter().map(|(a, _)| a).collect(),
            local: (local != LocalImage::default()).then_some(local),
        },
    );
}

/// How an image runs on a machine of the local runtime: `root`, `command`, `prepare`, `env`.
fn read_local(e: &mut Entry<'_, '_, '_, '_>) -> LocalImage {
    let root = e.string("root");
    if let Some(r) = &root
        && r != "host"
        && !Path::new(r).is_absolute()
    {
        let span = e.span_of("root");
        e.bad("root", span, format!("is \"host\" or an absolute directory, not {r:?}"));
    }
    let command = e.string("command");
    let prepare = e.string("prepare");
    let mut env = BTreeMap::new();
    if let Some(v) = e.value("env") {
        match v.get_ref() {
            DeValue::Table(t) => {
                for (k, val) in t {
                    match val.get_ref() {
                        DeValue::String(s) => {
                            env.insert(k.get_ref().as_ref().to_owned(), s.as_ref().to_owned());
                        }
                        other => {
                            let key = format!("env.{}", quoted(k.get_ref()));
                            e.bad(&key, val.span(), format!("expected a string, found {}", other.type_str()));
                        }
                    }
                }
            }
            other => e.bad("env", v.span(), format!("expected a table of strings, found {}", other.type_str())),
        }
    }
    LocalImage { root, command, prepare, env }
}

/// The local environments declared in one file's `[images]` section (`--images-file`):
/// read as `apply` reads them; the image's other keys and the other sections are `apply`'s.
pub fn local_images(source: &Source) -> Result<BTreeMap<String, LocalImage>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = BTreeMap::new();
    let (doc, errors) = DeTable::parse_recoverable(&source.text);
    let none = BTreeSet::new();
    let mut r = Reader { source, problems: &mut problems, known_slots: &none };
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
            e.only(IMAGE_KEYS);
            out.insert(name.get_ref().as_ref().to_owned(), read_local(&mut e));
        }
    }
    if problems.is_empty() { Ok(out) } else { Err(problems) }
}

#[cfg(test)]
mod tests {
    use super::super::reader::bytes;
    use super::*;

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
