//! Who: domains, projects, users with their keypairs, keypair policies.

use toml::de::DeValue;

use crate::domain::directory::apply::keys;
use crate::domain::directory::apply::reader::{Entry, Ref};
use crate::domain::directory::apply::{Declared, DomainDecl, KeypairDecl, PolicyDecl, ProjectDecl, UserDecl};
use crate::domain::launch::validate::PRIORITY_RANGE;
use crate::domain::model::Role;

pub(in crate::domain::directory::apply) fn read_domain(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
) {
    e.only(keys::DOMAIN_KEYS);
    let limits = e.slots("limits");
    declared.domains.insert(name.to_owned(), DomainDecl { limits });
}

pub(in crate::domain::directory::apply) fn read_project(
    e: &mut Entry<'_, '_, '_, '_>,
    key: &str,
    declared: &mut Declared,
    refs: &mut Vec<Ref>,
) {
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

pub(in crate::domain::directory::apply) fn read_user(
    e: &mut Entry<'_, '_, '_, '_>,
    email: &str,
    declared: &mut Declared,
    refs: &mut Vec<Ref>,
) {
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

pub(in crate::domain::directory::apply) fn read_keypairs(
    e: &mut Entry<'_, '_, '_, '_>,
    refs: &mut Vec<Ref>,
) -> Vec<KeypairDecl> {
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
            (Some(Some(secret)), None) if !secret.is_empty() => {
                Some(crate::domain::directory::auth::hash_token(&secret))
            }
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
pub(in crate::domain::directory::apply) fn default_name(email: &str) -> String {
    let local = email.split('@').next().unwrap_or(email);
    let mut chars = local.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

pub(in crate::domain::directory::apply) fn read_policy(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
) {
    e.only(keys::POLICY_KEYS);
    let limits = e.slots("limits");
    let most = i64::from(i32::MAX);
    let concurrent =
        e.integer("max_concurrent_sessions", 0, most).unwrap_or(crate::domain::directory::apply::DEFAULT_CONCURRENT);
    let pending =
        e.integer("max_pending_sessions", 0, most).unwrap_or(crate::domain::directory::apply::DEFAULT_PENDING);
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
