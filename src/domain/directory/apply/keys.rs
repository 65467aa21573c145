//! Every section and key a declaration file may hold: what the reader accepts (each entry
//! takes exactly its section's keys, anything else is an unknown key) and what
//! `sessiond apply --explain` prints, from the same lists.

/// A key of an entry: its name, the type of its value, its default, and what it does.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    pub kind: &'static str,
    /// `required`, or what holds when the key is absent.
    pub default: &'static str,
    pub meaning: &'static str,
}

const fn key(name: &'static str, kind: &'static str, default: &'static str, meaning: &'static str) -> Key {
    Key { name, kind, default, meaning }
}

const REQUIRED: &str = "required";
const SLOTS: &str = "slots: { cpu = 2, mem = \"4 GiB\", \"cuda.device\" = 1 }";

pub const DOMAIN_KEYS: &[Key] = &[key("limits", SLOTS, "no limit", "what the domain's sessions may hold together")];

pub const PROJECT_KEYS: &[Key] = &[
    key("limits", SLOTS, "no limit", "what the project's sessions may hold together"),
    key(
        "resource_groups",
        "list of strings",
        "none",
        "the resource groups its sessions may use, in order: the first is the default",
    ),
];

pub const USER_KEYS: &[Key] = &[
    key("domain", "string", REQUIRED, "the user's domain"),
    key("role", "USER | ADMIN | SUPERADMIN", "USER", "ADMIN administers every project of its domain"),
    key("name", "string", "from the e-mail", "the name the page shows"),
    key("projects", "list of strings", "none", "projects of its domain the user belongs to"),
    key("keypairs", "list of tables (the keys below)", "none", "the user's access keys"),
];

pub const KEYPAIR_KEYS: &[Key] = &[
    key("access_key", "string of letters and digits", REQUIRED, "the keypair's public name"),
    key("policy", "string", "default", "the keypair policy its sessions follow"),
    key("secret", "string", "one of secret, secret_sha256", "the bearer token, in clear (demo only)"),
    key("secret_sha256", "64 hexadecimal digits", "one of secret, secret_sha256", "the token's SHA-256"),
];

pub const POLICY_KEYS: &[Key] = &[
    key("limits", SLOTS, "no limit", "what one keypair's sessions may hold together"),
    key("max_concurrent_sessions", "integer ≥ 0", "10", "sessions of one keypair running at once"),
    key("max_pending_sessions", "integer ≥ 0", "20", "sessions of one keypair waiting at once"),
    key("max_session_lifetime_seconds", "integer ≥ 1", "none", "a session is terminated this long after it started"),
    key("max_extension_seconds", "integer ≥ 1", "none: no extension", "how far one extension pushes a lifetime back"),
    key("max_extensions", "integer ≥ 1", "none: no extension", "how many times one session may be extended"),
    key(
        "idle_timeout_seconds",
        "integer ≥ 1",
        "none: never idle",
        "no activity this long reclaims an interactive session",
    ),
    key("idle_utilization", SLOTS, "nothing", "per slot, the use at or above which a session is active"),
    key("idle_counts_terminal", "boolean", "false", "whether terminal input is activity"),
    key("max_priority", "integer -100 … 100", "100", "the highest priority of its sessions (launch, reprioritising)"),
];

pub const ENGINE_KIND: Key =
    key("kind", "slurm | local | simulated", REQUIRED, "simulated runs nothing: for the demo and tests only");

/// The keys of `kind = "slurm"`, `kind` first; the other kinds take `kind` alone.
pub const SLURM_KEYS: &[Key] = &[
    ENGINE_KIND,
    key("url", "http:// or https:// URL", REQUIRED, "slurmrestd"),
    key("partition", "string", REQUIRED, "the partition jobs are submitted to"),
    key("user", "string", REQUIRED, "the Slurm user jobs run as"),
    key("token_file", "path", "one of token_file, token_env", "a file holding the JWT for slurmrestd"),
    key("token_env", "string", "one of token_file, token_env", "an environment variable holding the JWT"),
    key("api_version", "string like v0.0.39", "the newest both sides speak", "slurmrestd's API version"),
    key("output_dir", "absolute path", REQUIRED, "a directory every node and this server see"),
    key("slurm_conf", "absolute path", "Slurm's default", "the cluster's slurm.conf, for srun (terminals)"),
    key("sessiond", "absolute path", "this server's own executable", "sessiond on the nodes (its sandbox)"),
    key(
        "relay_bind",
        "IP address",
        "every address of the node",
        "where a job's supervisor relays its apps for this server",
    ),
];

pub const GROUP_KEYS: &[Key] = &[
    key("description", "string", "empty", "what the page shows of the group"),
    key("scheduler", "FIFO | LIFO | DRF", "FIFO", "the order of its pending sessions within a priority"),
    key("pending_timeout_seconds", "integer ≥ 1", "none", "a session pending this long is cancelled"),
    key("session_types", "list of session types", "all", "the session types it takes"),
    key("engine", "string", "the local runtime or none", "the engine that runs its sessions"),
];

pub const AGENT_KEYS: &[Key] = &[
    key("resource_group", "string", REQUIRED, "the agent's resource group"),
    key("slots", SLOTS, "required unless this_machine", "the agent's capacity"),
    key("this_machine", "boolean", "false", "the local runtime's machine: its capacity is detected"),
    key("schedulable", "boolean", "true", "false drains it: nothing new starts there"),
];

pub const REGISTRY_KEYS: &[Key] = &[
    key("url", "https://HOST[:PORT] (http:// with insecure)", REQUIRED, "where the registry answers"),
    key("username", "string", "none", "who pulls (with password_file)"),
    key("password_file", "absolute path", "none", "the file holding the password (read when pulling)"),
    key("token_file", "absolute path", "none", "the file holding a bearer token, instead of a password"),
    key("insecure", "boolean", "false", "plain HTTP, for a loopback address only"),
];

pub const STORAGE_KEYS: &[Key] = &[
    key(
        "path",
        "absolute path",
        REQUIRED,
        "a directory of this machine (a Slurm group's: one every node sees); sessiond names its folders",
    ),
    key("quota", "bytes, like \"10 GiB\"", "10 GiB", "a new folder's quota unless its creator asks for less"),
    key("projects", "list of \"DOMAIN/NAME\"", "every project", "the projects whose users may make folders here"),
];

pub const IMAGE_KEYS: &[Key] = &[
    key("types", "list of session types", REQUIRED, "the session types it can run"),
    key("minimum", SLOTS, "none", "the least a session of it may ask for"),
    key(
        "apps",
        "list of names or tables",
        "none",
        "the applications it offers: a name (terminal, jupyter, tensorboard, …) or { name, port, command, base_path }",
    ),
    key("ref", "REGISTRY/REPOSITORY:TAG or …@sha256:…", "none", "the OCI image pulled for it (instead of root)"),
    key("root", "\"host\" or an absolute directory", "host", "where sessiond runs it itself: the root it sees"),
    key("command", "string", "exec sleep infinity", "what an interactive session runs"),
    key("prepare", "string", "none", "a one-time step before its first session on a machine (PULLING)"),
    key("env", "table of strings", "none", "environment variables of its sessions"),
];

/// The keys of one app of an image's `apps`.
pub const APP_KEYS: &[Key] = &[
    key("name", "lower-case letters, digits and -", REQUIRED, "its name, a part of its address"),
    key("port", "1 to 65535", REQUIRED, "where it listens inside the session, on the session's own loopback"),
    key("command", "string", "none", "what starts it with the session ({base}: the path it is served under)"),
    key("base_path", "boolean", "false", "it is served under its base path; otherwise the proxy takes it off"),
];

/// The names of `keys`.
pub fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

/// One kind of entry: how it is written, and its keys.
pub struct EntryKind {
    pub header: &'static str,
    pub note: &'static str,
    pub keys: &'static [Key],
}

/// Every kind of entry, in the order of a file.
pub const ENTRIES: &[EntryKind] = &[
    EntryKind { header: "[domains.NAME]", note: "", keys: DOMAIN_KEYS },
    EntryKind { header: "[projects.\"DOMAIN/NAME\"]", note: "", keys: PROJECT_KEYS },
    EntryKind { header: "[keypair_policies.NAME]", note: "", keys: POLICY_KEYS },
    EntryKind { header: "[users.\"EMAIL\"]", note: "", keys: USER_KEYS },
    EntryKind { header: "[users.\"EMAIL\"] keypairs = [{ … }]", note: "each keypair", keys: KEYPAIR_KEYS },
    EntryKind {
        header: "[engines.NAME]",
        note: "kind = \"local\" or \"simulated\" takes no other key",
        keys: SLURM_KEYS,
    },
    EntryKind { header: "[resource_groups.NAME]", note: "", keys: GROUP_KEYS },
    EntryKind { header: "[agents.NAME]", note: "", keys: AGENT_KEYS },
    EntryKind {
        header: "[registries.NAME]",
        note: "an image's ref starts with NAME/ (or the registry's host)",
        keys: REGISTRY_KEYS,
    },
    EntryKind { header: "[storage.NAME]", note: "data that outlives sessions: folders", keys: STORAGE_KEYS },
    EntryKind {
        header: "[images.\"NAME\"]",
        note: "ref, root, command, prepare, env: where sessiond runs it",
        keys: IMAGE_KEYS,
    },
    EntryKind {
        header: "[images.\"NAME\"] apps = [{ … }]",
        note: "each app with its port (a name alone is an app too)",
        keys: APP_KEYS,
    },
];

/// The reference `sessiond apply --explain` prints: every entry, key, type and default.
pub fn explain() -> String {
    let mut out = String::from(
        "# Every section and key of a declaration file (`sessiond apply -f FILE`).\n\
         # key: type (default) - meaning\n",
    );
    for entry in ENTRIES {
        out.push('\n');
        out.push_str(entry.header);
        if !entry.note.is_empty() {
            out.push_str("  # ");
            out.push_str(entry.note);
        }
        out.push('\n');
        for k in entry.keys {
            out.push_str(&format!("  {}: {} ({}) - {}\n", k.name, k.kind, k.default, k.meaning));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::domain::directory::apply::file::parse;
    use crate::domain::directory::apply::reader::Source;

    /// A valid entry of each kind, as `(header lines, keys)`, that a key is added to.
    fn base(entry: &EntryKind) -> (&'static str, Vec<(&'static str, &'static str)>) {
        match entry.header {
            "[domains.NAME]" => ("[domains.d]", vec![]),
            "[projects.\"DOMAIN/NAME\"]" => ("[domains.d]\n[projects.\"d/p\"]", vec![]),
            "[keypair_policies.NAME]" => ("[keypair_policies.default]", vec![]),
            "[users.\"EMAIL\"]" => ("[domains.d]\n[users.\"u@x.io\"]", vec![("domain", "\"d\"")]),
            "[users.\"EMAIL\"] keypairs = [{ … }]" => ("", vec![("access_key", "\"AK\""), ("secret", "\"s\"")]),
            "[engines.NAME]" => (
                "[engines.e]",
                vec![
                    ("kind", "\"slurm\""),
                    ("url", "\"http://x\""),
                    ("partition", "\"p\""),
                    ("user", "\"u\""),
                    ("token_env", "\"T\""),
                    ("output_dir", "\"/o\""),
                ],
            ),
            "[resource_groups.NAME]" => ("[resource_groups.g]", vec![]),
            "[agents.NAME]" => ("[resource_groups.g]\n[agents.a]", vec![("resource_group", "\"g\"")]),
            "[registries.NAME]" => ("[registries.r]", vec![("url", "\"https://r.example.org\"")]),
            "[storage.NAME]" => ("[storage.s]", vec![("path", "\"/data\"")]),
            "[images.\"NAME\"]" => ("[images.i]", vec![("types", "[\"BATCH\"]")]),
            "[images.\"NAME\"] apps = [{ … }]" => ("", vec![("name", "\"web\""), ("port", "8000")]),
            other => panic!("no example entry for {other}: add one"),
        }
    }

    /// Every key of the reference is one the reader reads: given a value of no type any
    /// key takes, each is refused by name (a key listed and never read would pass unseen).
    #[test]
    fn the_reader_reads_every_key_the_reference_lists() {
        let known: BTreeSet<String> = ["cpu", "mem"].into_iter().map(String::from).collect();
        for entry in ENTRIES {
            let (header, fields) = base(entry);
            for k in entry.keys {
                let mut fields = fields.clone();
                fields.retain(|(name, _)| *name != k.name);
                if k.name == "token_file" {
                    fields.retain(|(name, _)| *name != "token_env");
                }
                fields.push((k.name, "[[1]]"));
                let text = if header.is_empty() {
                    let pairs: Vec<String> = fields.iter().map(|(n, v)| format!("{n} = {v}")).collect();
                    let pairs = pairs.join(", ");
                    if entry.header.contains("apps") {
                        format!("[images.i]\ntypes = [\"BATCH\"]\napps = [{{ {pairs} }}]\n")
                    } else {
                        format!("[domains.d]\n[users.\"u@x.io\"]\ndomain = \"d\"\nkeypairs = [{{ {pairs} }}]\n")
                    }
                } else {
                    let lines: Vec<String> = fields.iter().map(|(n, v)| format!("{n} = {v}")).collect();
                    format!("{header}\n{}\n", lines.join("\n"))
                };
                let problems = parse(&[Source { name: "f.toml".into(), text: text.clone() }], &known)
                    .expect_err("a value of no type any key takes");
                let named = problems.iter().any(|p| {
                    let rest = p.key.rsplit_once(&format!(".{}", k.name)).map(|(_, rest)| rest);
                    rest.is_some_and(|r| r.is_empty() || r.starts_with('[')) && !p.message.starts_with("unknown key")
                });
                assert!(named, "{}: `{}` is listed but not read:\n{text}\n{problems:?}", entry.header, k.name);
            }
        }
    }

    /// An image's apps: a port out of range, a name twice, a bad name and a terminal with a
    /// port are refused at their place; names alone and declarations are kept.
    #[test]
    fn apps_are_checked_where_they_are_declared() {
        let known: BTreeSet<String> = ["cpu", "mem"].into_iter().map(String::from).collect();
        let read = |apps: &str| {
            let text = format!("[images.i]\ntypes = [\"BATCH\"]\napps = {apps}\n");
            parse(&[Source { name: "f.toml".into(), text }], &known)
        };
        let refused = |apps: &str, key: &str, words: &str| {
            let problems = read(apps).expect_err("refused");
            assert!(problems.iter().any(|p| p.key == key && p.message.contains(words)), "{apps}: {problems:?}");
        };
        refused("[{ name = \"web\", port = 70000 }]", "images.i.apps[0].port", "between 1 and 65535");
        refused("[{ name = \"web\", port = 0 }]", "images.i.apps[0].port", "between 1 and 65535");
        refused("[{ name = \"web\" }]", "images.i.apps[0].port", "required");
        refused("[\"jupyter\", { name = \"jupyter\", port = 9 }]", "images.i.apps", "listed twice");
        refused("[{ name = \"Web\", port = 9 }]", "images.i.apps", "no app name");
        refused("[{ name = \"terminal\", port = 9 }]", "images.i.apps", "shell");
        refused(
            "[{ name = \"web\", port = 9, base_path = true, command = \"x\" }]",
            "images.i.apps[0].command",
            "{base}",
        );
        let declared =
            read("[\"terminal\", { name = \"web\", port = 8000, command = \"python3 -m http.server 8000\" }]")
                .expect("accepted");
        let apps: Vec<String> = declared.images["i"].apps.iter().map(|a| a.spec().shown()).collect();
        assert_eq!(apps, ["terminal", "web:8000"]);
    }

    #[test]
    fn the_reference_names_every_key_once_per_entry() {
        for entry in ENTRIES {
            let names = names(entry.keys);
            let unique: BTreeSet<_> = names.iter().collect();
            assert_eq!(unique.len(), names.len(), "{}", entry.header);
            assert!(explain().contains(entry.header));
        }
    }
}
