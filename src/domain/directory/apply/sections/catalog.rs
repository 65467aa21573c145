//! What sessions run and keep: registries, storage, images and their apps.

use std::collections::BTreeMap;
use std::path::Path;

use toml::de::DeValue;

use crate::domain::directory::apply::keys;
use crate::domain::directory::apply::reader::{Entry, Ref, quoted};
use crate::domain::directory::apply::{Declared, ImageDecl};
use crate::domain::runtime::environments::LocalImage;

use super::require_absolute;

/// A registry: its URL, credentials of one kind (files), plain HTTP on loopback only.
pub(in crate::domain::directory::apply) fn read_registry(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
) {
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

pub(in crate::domain::directory::apply) fn read_storage(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
    refs: &mut Vec<Ref>,
) {
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
                toml::de::DeValue::String(s) => crate::domain::directory::apply::reader::bytes(s),
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

pub(in crate::domain::directory::apply) fn read_image(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
    refs: &mut Vec<Ref>,
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
                app.only(keys::APP_KEYS);
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
pub(in crate::domain::directory::apply) fn read_local(e: &mut Entry<'_, '_, '_, '_>) -> LocalImage {
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
