//! Where sessions run: engines, resource groups, agents.

use crate::domain::directory::apply::keys;
use crate::domain::directory::apply::reader::{Entry, Ref};
use crate::domain::directory::apply::{AgentDecl, Declared, EngineDecl, GroupDecl};
use crate::domain::model::{SchedulerStrategy, SessionType};
use crate::domain::runtime::engines::{EngineKind, EngineSettings, SlurmSettings, TokenSource};

use super::require_absolute;

/// The pseudo-section of a declared agent's check of its group's engine.
pub(in crate::domain::directory::apply) const AGENT_ENGINE: &str = "agent's engine";

pub(in crate::domain::directory::apply) fn read_engine(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
) {
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

pub(in crate::domain::directory::apply) fn read_group(
    e: &mut Entry<'_, '_, '_, '_>,
    name: &str,
    declared: &mut Declared,
    refs: &mut Vec<Ref>,
) {
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

pub(in crate::domain::directory::apply) fn read_agent(
    e: &mut Entry<'_, '_, '_, '_>,
    id: &str,
    declared: &mut Declared,
    refs: &mut Vec<Ref>,
) {
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
