//! Each section's entries read into what they declare: its keys, their defaults and the
//! references to other sections (checked once every file is read).

use std::collections::BTreeMap;
use std::path::Path;

use toml::de::DeValue;

use super::keys;
use super::reader::{Entry, Ref, quoted};
use super::{
    AgentDecl, Declared, DomainDecl, EngineDecl, GroupDecl, ImageDecl, KeypairDecl, PolicyDecl, ProjectDecl, UserDecl,
};
use crate::domain::launch::validate::PRIORITY_RANGE;
use crate::domain::runtime::engines::{EngineKind, EngineSettings, SlurmSettings, TokenSource};

/// The pseudo-section of a declared agent's check of its group's engine.
pub(super) const AGENT_ENGINE: &str = "agent's engine";
use crate::domain::environments::LocalImage;
use crate::domain::model::{Role, SchedulerStrategy, SessionType};

pub(super) fn read_domain(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    e.only(keys::DOMAIN_KEYS);
    let limits = e.slots("limits");
    declared.domains.insert(name.to_owned(), DomainDecl { limits });
}

pub(super) fn read_project(e: &mut Entry<'_, '_, '_, '_>, key: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    e.only(keys::PROJECT_KEYS);
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

pub(super) fn read_user(e: &mut Entry<'_, '_, '_, '_>, email: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    e.only(keys::USER_KEYS);
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

pub(super) fn read_keypairs(e: &mut Entry<'_, '_, '_, '_>, refs: &mut Vec<Ref>) -> Vec<KeypairDecl> {
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
        k.only(keys::KEYPAIR_KEYS);
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
pub(super) fn default_name(email: &str) -> String {
    let local = email.split('@').next().unwrap_or(email);
    let mut chars = local.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

pub(super) fn read_policy(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    e.only(keys::POLICY_KEYS);
    let limits = e.slots("limits");
    let most = i64::from(i32::MAX);
    let concurrent = e.integer("max_concurrent_sessions", 0, most).unwrap_or(super::DEFAULT_CONCURRENT);
    let pending = e.integer("max_pending_sessions", 0, most).unwrap_or(super::DEFAULT_PENDING);
    let lifetime = e.integer("max_session_lifetime_seconds", 1, i64::MAX);
    let extension = e.integer("max_extension_seconds", 1, most);
    let extensions = e.integer("max_extensions", 1, most);
    let idle_timeout = e.integer("idle_timeout_seconds", 1, most);
    let idle_utilization = e.slots("idle_utilization");
    let idle_counts_terminal = e.boolean("idle_counts_terminal", false);
    let (lowest, highest) = (*PRIORITY_RANGE.start(), *PRIORITY_RANGE.end());
    let max_priority = e.integer("max_priority", i64::from(lowest), i64::from(highest));
    // Idle checks need a timeout, and a timeout needs something that counts as activity.
    let activity = idle_utilization.slot_names().next().is_some() || idle_counts_terminal;
    if idle_timeout.is_some() && !activity {
        let span = e.span_of("idle_timeout_seconds");
        e.bad(
            "idle_timeout_seconds",
            span,
            "needs idle_utilization or idle_counts_terminal: without them nothing counts as activity".to_owned(),
        );
    }
    if idle_timeout.is_none() && activity {
        let key =
            if idle_utilization.slot_names().next().is_none() { "idle_counts_terminal" } else { "idle_utilization" };
        let span = e.span_of(key);
        e.bad(key, span, "needs idle_timeout_seconds: how long without activity reclaims a session".to_owned());
    }
    let clamp = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
    declared.policies.insert(
        name.to_owned(),
        PolicyDecl {
            limits,
            max_concurrent_sessions: clamp(concurrent),
            max_pending_sessions: clamp(pending),
            max_session_lifetime_seconds: lifetime,
            max_extension_seconds: extension,
            max_extensions: extensions.map(clamp),
            idle_timeout_seconds: idle_timeout,
            idle_utilization,
            idle_counts_terminal,
            max_priority: max_priority.map(clamp),
        },
    );
}

/// A path key's value that must be absolute: otherwise a problem at its span saying `what`.
fn require_absolute(e: &mut Entry<'_, '_, '_, '_>, key: &str, value: Option<&str>, what: &str) {
    if value.is_some_and(|v| !v.starts_with('/')) {
        let span = e.span_of(key);
        e.bad(key, span, what.to_owned());
    }
}

pub(super) fn read_engine(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    let Some(kind_text) = e.required_string("kind") else {
        e.only(keys::SLURM_KEYS);
        return;
    };
    let Some(kind) = EngineKind::parse(&kind_text.to_lowercase()) else {
        let span = e.span_of("kind");
        let kinds: Vec<&str> = EngineKind::ALL.iter().map(|k| k.as_str()).collect();
        e.bad("kind", span, format!("unknown engine kind {kind_text:?}; the kinds are {}", kinds.join(", ")));
        return;
    };
    let settings = match kind {
        EngineKind::Simulated => {
            e.only(&[keys::ENGINE_KIND]);
            EngineSettings::Simulated
        }
        EngineKind::Local => {
            e.only(&[keys::ENGINE_KIND]);
            EngineSettings::Local
        }
        EngineKind::Slurm => {
            e.only(keys::SLURM_KEYS);
            let url = e.required_string("url");
            if let Some(u) = &url
                && !(u.starts_with("http://") || u.starts_with("https://"))
            {
                let span = e.span_of("url");
                e.bad("url", span, "slurmrestd's URL starts with http:// or https://".to_owned());
            }
            let partition = e.required_string("partition");
            let user = e.required_string("user");
            let output_dir = e.required_string("output_dir");
            require_absolute(
                e,
                "output_dir",
                output_dir.as_deref(),
                "an absolute directory every node and this server see",
            );
            let api_version = e.string("api_version");
            let slurm_conf = e.string("slurm_conf");
            require_absolute(e, "slurm_conf", slurm_conf.as_deref(), "an absolute path to the cluster's slurm.conf");
            let sessiond = e.string("sessiond");
            require_absolute(e, "sessiond", sessiond.as_deref(), "the absolute path of sessiond on the nodes");
            let relay_bind = e.string("relay_bind");
            if relay_bind.as_deref().is_some_and(|a| a.parse::<std::net::IpAddr>().is_err()) {
                let span = e.span_of("relay_bind");
                e.bad("relay_bind", span, "an IP address for every node to listen on, like 0.0.0.0 or ::".to_owned());
            }
            let token = match (e.string("token_file"), e.string("token_env")) {
                (Some(f), None) => Some(TokenSource::File(f)),
                (None, Some(v)) => Some(TokenSource::Env(v)),
                (Some(_), Some(_)) => {
                    let span = e.span_of("token_env");
                    e.bad("token_env", span, "give token_file or token_env, not both".to_owned());
                    None
                }
                (None, None) => {
                    let (line, path) = (e.line, e.path.clone());
                    e.r.problem_at(
                        line,
                        &path,
                        "a Slurm engine needs token_file or token_env (where its JWT is; never the token itself)"
                            .to_owned(),
                    );
                    None
                }
            };
            let (Some(url), Some(partition), Some(user), Some(token), Some(output_dir)) =
                (url, partition, user, token, output_dir)
            else {
                return;
            };
            let url = url.trim_end_matches('/').to_owned();
            EngineSettings::Slurm(Box::new(SlurmSettings {
                url,
                partition,
                user,
                token,
                api_version,
                output_dir,
                slurm_conf,
                sessiond,
                relay_bind,
            }))
        }
    };
    debug_assert_eq!(settings.kind(), kind);
    declared.engines.insert(name.to_owned(), EngineDecl { settings });
}

pub(super) fn read_group(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    e.only(keys::GROUP_KEYS);
    let engine = e.string("engine");
    if let Some(engine) = &engine {
        let span = e.span_of("engine");
        e.reference(refs, "engine", span, "engines", engine.clone(), "engine");
    }
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
        .insert(name.to_owned(), GroupDecl { description, scheduler, pending_timeout_seconds, session_types, engine });
}

pub(super) fn read_agent(e: &mut Entry<'_, '_, '_, '_>, id: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    e.only(keys::AGENT_KEYS);
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
    e.reference(refs, "resource_group", span.clone(), "resource_groups", group.clone(), "resource group");
    if !this_machine {
        // Checked once every file is read: its group's engine must run declared agents.
        e.reference(refs, "resource_group", span, AGENT_ENGINE, group.clone(), "agent");
    }
    declared.agents.insert(
        id.to_owned(),
        AgentDecl { resource_group: group, slots: (!this_machine).then_some(slots), schedulable },
    );
}

/// A registry: its URL, credentials of one kind (files), plain HTTP on loopback only.
pub(super) fn read_registry(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared) {
    e.only(keys::REGISTRY_KEYS);
    let url = e.required_string("url");
    let username = e.string("username");
    let password_file = e.string("password_file");
    let token_file = e.string("token_file");
    require_absolute(e, "password_file", password_file.as_deref(), "is an absolute path");
    require_absolute(e, "token_file", token_file.as_deref(), "is an absolute path");
    let insecure = e.boolean("insecure", false);
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') {
        // An image's ref starts with it: it must not read as a host (a `.` or a `:`).
        let line = e.line;
        let path = e.path.clone();
        e.r.problem_at(line, &path, "a registry's name has lower-case letters, digits, `-` and `_` only".to_owned());
        return;
    }
    let Some(url) = url else { return };
    let registry = crate::domain::runtime::image::registry::Registry {
        url,
        username,
        password_file: password_file.map(Into::into),
        token_file: token_file.map(Into::into),
        insecure,
    };
    if let Err(why) = registry.validate() {
        let key = if why.contains("insecure") || why.contains("loopback") {
            "insecure"
        } else if why.starts_with("url") {
            "url"
        } else {
            "username"
        };
        let span = e.span_of(key);
        e.bad(key, span, why);
        return;
    }
    declared.registries.insert(name.to_owned(), registry);
}

pub(super) fn read_storage(e: &mut Entry<'_, '_, '_, '_>, name: &str, declared: &mut Declared, refs: &mut Vec<Ref>) {
    use crate::domain::storage::{DEFAULT_QUOTA_BYTES, Storage, valid_name};
    e.only(keys::STORAGE_KEYS);
    let path = e.required_string("path");
    require_absolute(e, "path", path.as_deref(), "an absolute directory (sessiond names its folders under it)");
    if path.as_deref().is_some_and(|p| p.split('/').any(|part| part == "..") || p.chars().any(char::is_control)) {
        let span = e.span_of("path");
        e.bad("path", span, "a directory without `..` or control characters".to_owned());
    }
    let quota_bytes = match e.value("quota").map(|v| (v.span(), v.get_ref().clone())) {
        None => Some(DEFAULT_QUOTA_BYTES),
        Some((span, value)) => {
            let read = match &value {
                toml::de::DeValue::String(s) => super::reader::bytes(s),
                toml::de::DeValue::Integer(i) => i.as_str().parse::<f64>().ok(),
                _ => None,
            };
            let quota = read.filter(|b| *b >= 1.0 && *b <= 1e18).map(|b| b as i64);
            if quota.is_none() {
                e.bad("quota", span, "a size of at least one byte, like \"10 GiB\" or 1000000".to_owned());
            }
            quota
        }
    };
    let projects = e.strings("projects");
    for (p, span) in projects.iter().flatten() {
        e.reference(refs, "projects", span.clone(), "projects", p.clone(), "project");
    }
    if !valid_name(name) {
        let (line, path) = (e.line, e.path.clone());
        e.r.problem_at(line, &path, "a storage's name has lower-case letters, digits, `-` and `_` only".to_owned());
        return;
    }
    let (Some(path), Some(quota_bytes)) = (path, quota_bytes) else { return };
    let projects = projects.map(|p| p.into_iter().map(|(name, _)| name).collect());
    declared.storage.insert(name.to_owned(), Storage { path, quota_bytes, projects });
}

pub(super) fn read_image(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
    refs: &mut Vec<super::reader::Ref>,
) {
    e.only(keys::IMAGE_KEYS);
    let types = if e.value("types").is_none() {
        e.missing("types");
        None
    } else {
        e.session_types("types")
    };
    let minimum = e.slots("minimum");
    let apps = read_apps(e);
    let local = read_local(e);
    if let Some(registry) = local.reference.as_deref().and_then(crate::domain::runtime::image::registry::named) {
        let span = e.span_of("ref");
        e.reference(refs, "ref", span, "registries", registry.to_owned(), "registry");
    }
    let Some(types) = types else { return };
    declared.images.insert(
        name.to_owned(),
        ImageDecl { types, minimum, apps, local: (local != LocalImage::default()).then_some(local) },
    );
}

/// An image's `apps`: each a name alone (`"terminal"`, or a common one with its defaults:
/// `"jupyter"`), or a table `{ name, port, command, base_path }`; no name twice.
fn read_apps(e: &mut Entry<'_, '_, '_, '_>) -> Vec<crate::domain::apps::Declared> {
    use crate::domain::apps::{AppSpec, Declared, TERMINAL, valid_name};
    use toml::de::DeValue;
    let Some(v) = e.value("apps") else { return Vec::new() };
    let DeValue::Array(items) = v.get_ref() else {
        e.bad("apps", v.span(), format!("expected an array of names or tables, found {}", v.get_ref().type_str()));
        return Vec::new();
    };
    let mut apps: Vec<Declared> = Vec::new();
    for item in items.iter() {
        let declared = match item.get_ref() {
            DeValue::String(name) => Declared::Name(name.as_ref().to_owned()),
            DeValue::Table(t) => {
                let line = e.r.line(item.span().start);
                let mut app = Entry { r: &mut *e.r, path: format!("{}.apps[{}]", e.path, apps.len()), fields: t, line };
                app.only(super::keys::APP_KEYS);
                let Some(name) = app.required_string("name") else { continue };
                let port = app.integer("port", 1, 65535).and_then(|p| u16::try_from(p).ok());
                if port.is_none() && app.value("port").is_none() {
                    app.missing("port");
                    continue;
                }
                let command = app.string("command");
                let base_path = app.boolean("base_path", false);
                if base_path && command.as_deref().is_some_and(|c| !c.contains(crate::domain::apps::BASE)) {
                    let span = app.span_of("command");
                    app.bad("command", span, "base_path = true: the command takes its base path as {base}".to_owned());
                }
                Declared::Spec(AppSpec { name, port, command, base_path })
            }
            other => {
                e.bad("apps", item.span(), format!("expected a name or a table, found {}", other.type_str()));
                continue;
            }
        };
        let name = declared.spec().name;
        if !valid_name(&name) {
            e.bad(
                "apps",
                item.span(),
                format!("{name:?} is no app name (lower-case letters, digits and -, from a letter)"),
            );
        } else if name == TERMINAL && matches!(declared, Declared::Spec(_)) {
            e.bad("apps", item.span(), "terminal is the session's shell: named alone, with no port".to_owned());
        } else if apps.iter().any(|a| a.spec().name == name) {
            e.bad("apps", item.span(), format!("{name:?} is listed twice"));
        } else {
            apps.push(declared);
        }
    }
    apps
}

/// How an image runs on a machine of the local runtime: `ref` (an OCI image) or `root`,
/// `command`, `prepare`, `env`.
pub(super) fn read_local(e: &mut Entry<'_, '_, '_, '_>) -> LocalImage {
    let reference = e.string("ref");
    if let Some(r) = &reference {
        let span = e.span_of("ref");
        // A declared registry's name in the place of the host: read as a host to check the rest.
        let as_host = match crate::domain::runtime::image::registry::named(r) {
            Some(name) => r.replacen(name, "registry.invalid", 1),
            None => r.clone(),
        };
        if let Err(why) = as_host.parse::<oci_client::Reference>() {
            e.bad("ref", span, format!("is not an image reference (REGISTRY/REPOSITORY:TAG or …@sha256:…): {why}"));
        } else if e.value("root").is_some() || e.value("prepare").is_some() {
            e.bad(
                "ref",
                span,
                "an image pulled from a registry is its own root: no root and no prepare beside ref".to_owned(),
            );
        }
    }
    let root = e.string("root");
    if let Some(r) = &root
        && r != "host"
    {
        let span = e.span_of("root");
        let path = Path::new(r);
        // The root sessions see, read-only: never the host's own (that is "host", which
        // binds only its system directories), and a directory that is there.
        let why = if !path.is_absolute() {
            Some(format!("is \"host\" or an absolute directory, not {r:?}"))
        } else if r.contains('\0') {
            Some("may not contain a NUL character".to_owned())
        } else if std::fs::canonicalize(path).is_ok_and(|p| p == Path::new("/")) {
            Some(
                "may not be / (the host's whole file system); \"host\" gives sessions its system directories"
                    .to_owned(),
            )
        } else if !path.is_dir() {
            Some(format!("{r:?} is not a directory on this machine"))
        } else {
            None
        };
        if let Some(why) = why {
            e.bad("root", span, why);
        }
    }
    let command = e.string("command");
    let prepare = e.string("prepare");
    let mut env = BTreeMap::new();
    if let Some(v) = e.value("env") {
        match v.get_ref() {
            DeValue::Table(t) => {
                for (k, val) in t {
                    let name: &str = k.get_ref().as_ref();
                    if !crate::domain::launch::validate::valid_env_name(name) {
                        let key = format!("env.{}", quoted(k.get_ref()));
                        let why = "is not a variable name (letters, digits and `_`, not starting with a digit)";
                        e.bad(&key, k.span(), why.to_owned());
                        continue;
                    }
                    match val.get_ref() {
                        DeValue::String(s) if s.contains('\0') => {
                            let key = format!("env.{}", quoted(k.get_ref()));
                            e.bad(&key, val.span(), "may not contain a NUL character".to_owned());
                        }
                        DeValue::String(s) => {
                            env.insert(name.to_owned(), s.as_ref().to_owned());
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
    LocalImage { reference, root, command, prepare, env }
}
