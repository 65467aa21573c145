//! Every check of a launch request. Each check is a small function that returns its
//! problems; [`validate`] runs them all and reports every problem together.

use std::collections::BTreeSet;

use sea_orm::{ConnectionTrait, EntityTrait};

use entity::{image, resource_group};

use super::{LaunchLimits, LaunchRequest, Plan};
use crate::domain::directory::auth::Viewer;
use crate::domain::directory::catalog::{self, SchedulableAgent};
use crate::domain::error::Text;
use crate::domain::model::SessionType;
use crate::domain::model::slots::{ResourceRequest, ResourceSlots};
use crate::domain::{DomainError, DomainResult, InputProblem, model::clock, sessions::visibility};

pub const NAME_MIN: usize = 4;
pub const NAME_MAX: usize = 64;
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i32> = -100..=100;
pub const MAX_CLUSTER_SIZE: i32 = 64;
pub const MAX_ENV_VARS: usize = 100;
/// Most entries of `resources` (each slot may appear once; there are far fewer slots).
pub const MAX_RESOURCE_ENTRIES: usize = 64;
pub const MAX_ENV_VALUE_BYTES: usize = 4096;
pub const MAX_STARTUP_COMMAND_BYTES: usize = 8192;
pub const MAX_IDEMPOTENCY_KEY: usize = 200;

type Problems = Vec<InputProblem>;

fn problem(code: &str, field: impl Into<String>, message: impl Into<String>) -> InputProblem {
    InputProblem::new(code, Some(field.into()), message)
}

/// Whether `name` follows the session name rule.
pub fn valid_name(name: &str) -> bool {
    let len = name.chars().count();
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    let edge = |c: char| c.is_ascii_alphanumeric() || c == '_';
    (NAME_MIN..=NAME_MAX).contains(&len)
        && name.chars().all(inner)
        && name.chars().next().is_some_and(edge)
        && name.chars().last().is_some_and(edge)
}

/// Whether `name` is a variable name a session (or an image) may set.
pub(crate) fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The names of a launch of `count`: the name itself for one session launched alone,
/// `<name>-1` … `<name>-<count>` for a batch.
pub fn session_names(name: &str, count: Option<u32>) -> Vec<String> {
    match count {
        None => vec![name.to_owned()],
        Some(n) => (1..=n).map(|i| format!("{name}-{i}")).collect(),
    }
}

/// The batch size: 1 to the configured maximum.
fn check_count(count: Option<i64>, limits: &LaunchLimits) -> (Option<u32>, Problems) {
    match count {
        None => (None, Vec::new()),
        Some(n) if (1..=i64::from(limits.max_count)).contains(&n) => (u32::try_from(n).ok(), Vec::new()),
        Some(_) => {
            (None, vec![problem("OUT_OF_RANGE", "count", format!("`count` is between 1 and {}", limits.max_count))])
        }
    }
}

/// What a valid name is, in words ([`valid_name`]).
pub fn name_rule() -> String {
    format!(
        "a name has {NAME_MIN}–{NAME_MAX} characters: letters, digits, `_`, `.` and `-`, starting and ending with a letter, digit or `_`"
    )
}

/// The name, and every name of the batch it makes.
fn check_names(name: &str, names: &[String]) -> Problems {
    if !valid_name(name) {
        return vec![problem("INVALID_NAME", "name", name_rule())];
    }
    match names.iter().find(|n| !valid_name(n)) {
        Some(bad) => vec![problem(
            "INVALID_NAME",
            "name",
            format!("the session name `{bad}` of this batch is longer than {NAME_MAX} characters"),
        )],
        None => Vec::new(),
    }
}

fn stored_types(value: &serde_json::Value) -> Vec<&str> {
    value.as_array().into_iter().flatten().filter_map(|t| t.as_str()).collect()
}

/// The image exists and supports the session type.
fn check_image(req: &LaunchRequest, image: Option<&image::Model>) -> Problems {
    let Some(i) = image else {
        return vec![problem("UNKNOWN_IMAGE", "image", format!("no image `{}`", req.image))];
    };
    let supported = stored_types(&i.supported_types);
    if supported.contains(&req.session_type.as_str()) {
        return Vec::new();
    }
    vec![problem(
        "UNSUPPORTED_TYPE",
        "session_type",
        format!(
            "image `{}` does not support {} sessions (it supports {})",
            i.name,
            req.session_type,
            supported.join(", ")
        ),
    )]
}

/// Known slots, each once, with a non-negative amount: the per-container request.
fn check_resources(req: &LaunchRequest, known: &BTreeSet<String>) -> (ResourceSlots, Problems) {
    let mut per_container = ResourceSlots::new();
    let mut problems = Vec::new();
    if let Some(p) = InputProblem::too_many("resources", req.resources.len(), MAX_RESOURCE_ENTRIES, "slot amounts") {
        return (per_container, vec![p]);
    }
    for (i, (slot, amount)) in req.resources.iter().enumerate() {
        let field = format!("resources[{i}]");
        if !known.contains(slot) {
            let known = known.iter().cloned().collect::<Vec<_>>().join(", ");
            problems.push(problem("UNKNOWN_SLOT", field, format!("unknown slot `{slot}` (known: {known})")));
        } else if !amount.is_finite() || *amount < 0.0 {
            problems.push(problem("INVALID_AMOUNT", field, format!("`{slot}` must be a non-negative number")));
        } else if slot.ends_with(".device") && amount.fract() != 0.0 {
            // Whole devices; a fraction of a device is a `.shares` slot.
            problems.push(problem("INVALID_AMOUNT", field, format!("`{slot}` counts whole devices")));
        } else if per_container.limit(slot).is_some() {
            problems.push(problem("DUPLICATE_SLOT", field, format!("`{slot}` is given twice")));
        } else {
            per_container.set(slot, *amount);
        }
    }
    (per_container, problems)
}

/// Each container requests at least the image's minimum: a problem at the amount given
/// (`resources[i]`), or at `resources` for a slot not given at all.
fn check_image_minimum(
    image: &image::Model,
    per_container: &ResourceSlots,
    given: &[(String, f64)],
) -> DomainResult<Problems> {
    let minimum = ResourceSlots::from_json(&image.minimum_slots)?;
    Ok(minimum
        .iter()
        .filter(|(slot, min)| per_container.get(slot) + 1e-9 < *min)
        .map(|(slot, min)| {
            let at = given.iter().position(|(s, _)| s == slot);
            problem(
                "BELOW_IMAGE_MINIMUM",
                at.map_or_else(|| "resources".to_owned(), |i| format!("resources[{i}]")),
                format!(
                    "image `{}` needs at least {} of `{slot}` per container",
                    image.name,
                    crate::domain::model::slots::shown(slot, min)
                ),
            )
        })
        .collect())
}

/// The requested group (default: the project's first) is one the project may use, and
/// takes sessions of this type.
fn check_resource_group(
    req: &LaunchRequest,
    project_name: &str,
    allowed: Vec<resource_group::Model>,
) -> (Option<resource_group::Model>, Problems) {
    let wanted = req.resource_group.clone().or_else(|| allowed.first().map(|g| g.name.clone()));
    let Some(name) = wanted else {
        return (None, vec![problem("NO_RESOURCE_GROUP", "resource_group", "the project may use no resource group")]);
    };
    let Some(group) = allowed.into_iter().find(|g| g.name == name) else {
        let message = format!("project `{project_name}` may not use a resource group `{name}`");
        return (None, vec![problem("UNKNOWN_RESOURCE_GROUP", "resource_group", message)]);
    };
    let problems = if stored_types(&group.allowed_session_types).contains(&req.session_type.as_str()) {
        Vec::new()
    } else {
        let message = format!("resource group `{}` does not take {} sessions", group.name, req.session_type);
        vec![problem("TYPE_NOT_ALLOWED", "resource_group", message)]
    };
    (Some(group), problems)
}

/// A batch session needs a startup command; only batch sessions take a batch timeout.
fn check_batch_settings(req: &LaunchRequest) -> Problems {
    let mut problems = Vec::new();
    let is_batch = req.session_type == SessionType::Batch;
    match req.startup_command.as_deref().map(str::trim) {
        None | Some("") if is_batch => problems.push(problem(
            "MISSING_STARTUP_COMMAND",
            "startup_command",
            "a batch session needs a startup command",
        )),
        Some(cmd) if cmd.len() > MAX_STARTUP_COMMAND_BYTES => problems.push(problem(
            "TOO_LONG",
            "startup_command",
            format!("the startup command is limited to {MAX_STARTUP_COMMAND_BYTES} bytes"),
        )),
        _ => {}
    }
    match req.batch_timeout_seconds {
        Some(_) if !is_batch => problems.push(problem(
            "BATCH_TIMEOUT_NOT_BATCH",
            "batch_timeout_seconds",
            "only batch sessions take a batch timeout",
        )),
        Some(t) if t <= 0 => problems.push(problem(
            "OUT_OF_RANGE",
            "batch_timeout_seconds",
            "the batch timeout is a positive number of seconds",
        )),
        _ => {}
    }
    problems
}

fn check_cluster_size(req: &LaunchRequest) -> Problems {
    if (1..=MAX_CLUSTER_SIZE).contains(&req.cluster_size) {
        return Vec::new();
    }
    vec![problem("OUT_OF_RANGE", "cluster_size", format!("the cluster size is between 1 and {MAX_CLUSTER_SIZE}"))]
}

/// The furthest ahead a session may be set to start.
pub const MAX_START_AHEAD_DAYS: i64 = 366;

/// A start time, for a batch session, at most [`MAX_START_AHEAD_DAYS`] ahead (a past one
/// starts at once).
fn check_starts_at(req: &LaunchRequest) -> Problems {
    let Some(at) = req.starts_at else { return Vec::new() };
    if req.session_type != SessionType::Batch {
        return vec![problem("ONLY_BATCH", "starts_at", "only a batch session has a start time")];
    }
    if let Some(p) = clock::out_of_range("starts_at", at) {
        return vec![p];
    }
    if at > clock::now() + chrono::TimeDelta::days(MAX_START_AHEAD_DAYS) {
        let message = format!("a start time is at most {MAX_START_AHEAD_DAYS} days ahead");
        return vec![problem("OUT_OF_RANGE", "starts_at", message)];
    }
    Vec::new()
}

fn check_priority(req: &LaunchRequest) -> Problems {
    if PRIORITY_RANGE.contains(&req.priority) {
        return Vec::new();
    }
    let message = format!("the priority is between {} and {}", PRIORITY_RANGE.start(), PRIORITY_RANGE.end());
    vec![problem("OUT_OF_RANGE", "priority", message)]
}

/// At most [`MAX_ENV_VARS`] variables, valid and distinct names, bounded values.
fn check_environment(req: &LaunchRequest) -> Problems {
    let mut problems = Vec::new();
    problems.extend(InputProblem::too_many(
        "environment",
        req.environment.len(),
        MAX_ENV_VARS,
        "environment variables",
    ));
    let mut seen = BTreeSet::new();
    for (i, (name, value)) in req.environment.iter().enumerate() {
        let field = format!("environment[{i}]");
        if !valid_env_name(name) {
            problems.push(problem(
                "INVALID_ENV_NAME",
                field,
                format!("`{name}` is not a variable name (letters, digits and `_`, not starting with a digit)"),
            ));
        } else if !seen.insert(name.as_str()) {
            problems.push(problem("DUPLICATE_ENV_NAME", field, format!("`{name}` is given twice")));
        } else if value.len() > MAX_ENV_VALUE_BYTES {
            problems.push(problem(
                "INVALID_ENV_VALUE",
                field,
                format!("the value of `{name}` is limited to {MAX_ENV_VALUE_BYTES} bytes"),
            ));
        } else if let Some(p) = InputProblem::control_characters(&field, value, Text::Lines) {
            problems.push(p);
        }
    }
    problems
}

/// Control characters in the request's text (see [`InputProblem::control_characters`]).
/// Checked before any of it reaches the database.
pub fn check_text(req: &LaunchRequest) -> DomainResult<()> {
    let fields = [
        ("name", Some(req.name.as_str()), Text::Line),
        ("image", Some(req.image.as_str()), Text::Line),
        ("resource_group", req.resource_group.as_deref(), Text::Line),
        ("startup_command", req.startup_command.as_deref(), Text::Lines),
        ("idempotency_key", req.idempotency_key.as_deref(), Text::Line),
        ("callback_url", req.callback_url.as_deref(), Text::Line),
    ];
    let problems: Problems = fields
        .into_iter()
        .filter_map(|(field, text, kind)| InputProblem::control_characters(field, text?, kind))
        .collect();
    if problems.is_empty() { Ok(()) } else { Err(DomainError::BadInput(problems)) }
}

/// A callback URL goes only where the server's `--callback-allow` lets it.
fn check_callback(req: &LaunchRequest, limits: &LaunchLimits) -> Problems {
    let mut problems = Vec::new();
    match &req.callback_url {
        Some(url) => problems.extend(limits.callbacks.check("callback_url", url).err()),
        None if req.callback_on_running => problems.push(problem(
            "CALLBACK_URL_REQUIRED",
            "callback_on_running",
            "a session told of its start needs a callback URL",
        )),
        None => {}
    }
    problems
}

fn check_idempotency_key(req: &LaunchRequest) -> Problems {
    match &req.idempotency_key {
        Some(key) if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY => vec![problem(
            "OUT_OF_RANGE",
            "idempotency_key",
            format!("an idempotency key has 1–{MAX_IDEMPOTENCY_KEY} bytes"),
        )],
        _ => Vec::new(),
    }
}

/// A request no agent of the group could ever hold never starts: `NEVER_FITS`. Clusters
/// are single-node (the scheduler places every container on one agent), so the whole
/// session must fit one agent's capacity. `agents` are every agent of the group, drained
/// and not answering ones included: a request that fits one of them waits (`NO_CAPACITY`)
/// until it takes sessions again.
pub fn never_fits(request: &ResourceRequest, agents: &[SchedulableAgent], group: &str) -> Option<DomainError> {
    let total = request.total();
    if agents.iter().any(|a| total.fits_in(&a.capacity, false)) {
        return None;
    }
    if agents.is_empty() {
        return Some(DomainError::NeverFits(format!("resource group `{group}` has no agent"), None));
    }
    let containers = request.cluster_size;
    let amount = crate::domain::model::slots::shown;
    let shown = |slot: &str| {
        let all = amount(slot, total.get(slot));
        if containers > 1 {
            format!("{all} ({containers} containers × {})", amount(slot, request.per_container.get(slot)))
        } else {
            all
        }
    };
    let over = total
        .iter()
        .map(|(slot, amount)| (slot, amount, agents.iter().map(|a| a.capacity.get(slot)).fold(0.0, f64::max)))
        .find(|(_, amount, largest)| *amount > largest + 1e-9);
    Some(match over {
        Some((slot, _, largest)) => DomainError::NeverFits(
            format!(
                "no agent of resource group `{group}` can ever hold this request: `{slot}` asks for {} but the largest agent has {}",
                shown(slot),
                amount(slot, largest)
            ),
            Some(slot.to_owned()),
        ),
        None => DomainError::NeverFits(
            format!("no single agent of resource group `{group}` has all the requested slots at once"),
            None,
        ),
    })
}

/// Every check of a launch; all input problems are reported together.
pub async fn validate(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    req: &LaunchRequest,
    count: Option<i64>,
    limits: LaunchLimits,
) -> DomainResult<Plan> {
    check_text(req)?;
    let mut access = visibility::project_access(db, viewer, req.project_id).await?;
    access.require_member(db, viewer, "only members launch sessions in it").await?;
    let project = access.project;

    let (count, mut problems) = check_count(count, &limits);
    let names = session_names(&req.name, count);
    problems.extend(check_names(&req.name, &names));
    let image = image::Entity::find_by_id(req.image.clone()).one(db).await?;
    problems.extend(check_image(req, image.as_ref()));
    let known = catalog::known_slots(db).await?;
    let (per_container, resource_problems) = check_resources(req, &known);
    problems.extend(resource_problems);
    if let Some(i) = &image {
        problems.extend(check_image_minimum(i, &per_container, &req.resources)?);
    }
    let allowed = catalog::project_resource_groups(db, project.id).await?;
    let (group, group_problems) = check_resource_group(req, &project.name, allowed);
    problems.extend(group_problems);
    problems.extend(check_batch_settings(req));
    problems.extend(check_cluster_size(req));
    problems.extend(check_priority(req));
    problems.extend(check_starts_at(req));
    if !req.depends_on.is_empty() {
        if req.session_type == SessionType::Batch {
            problems.extend(
                crate::domain::scheduling::dependencies::problems(db, viewer, &req.depends_on, project.id).await?,
            );
        } else {
            problems.push(problem("ONLY_BATCH", "depends_on", "only a batch session waits for others"));
        }
    }
    problems.extend(check_environment(req));
    problems.extend(check_idempotency_key(req));
    problems.extend(check_callback(req, &limits));
    let (mounts, mount_problems) =
        crate::domain::storage::mounts::check(db, viewer, project.id, &req.mounts, limits.max_mounts).await?;
    problems.extend(mount_problems);
    if !problems.is_empty() {
        return Err(DomainError::BadInput(problems));
    }
    let (Some(image), Some(resource_group)) = (image, group) else {
        return Err(DomainError::invariant("validation passed without image or group"));
    };
    let request = ResourceRequest::new(per_container, u32::try_from(req.cluster_size).unwrap_or(1));
    let agents = catalog::every_agent(db, &resource_group.name).await?;
    if let Some(refusal) = never_fits(&request, &agents, &resource_group.name) {
        return Err(refusal);
    }
    Ok(Plan { project, image, resource_group, request, names, mounts, launch: req.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_rule() {
        for ok in ["abcd", "my-notebook.v2", "_a_b", "A1_9", &"x".repeat(64)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["abc", "-abc", "abc-", "ab.", "a b c", "ümlaut", &"x".repeat(65), "abc/def"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn batch_names_are_numbered() {
        assert_eq!(session_names("train", Some(3)), ["train-1", "train-2", "train-3"]);
        assert_eq!(session_names("train", None), ["train"]);
    }

    #[test]
    fn environment_names() {
        assert!(valid_env_name("CUDA_VISIBLE_DEVICES"));
        assert!(valid_env_name("_x1"));
        assert!(!valid_env_name("1X"));
        assert!(!valid_env_name("A-B"));
        assert!(!valid_env_name(""));
    }

    fn agent(id: &str, cpu: f64, gpu: f64) -> SchedulableAgent {
        SchedulableAgent {
            id: id.to_owned(),
            resource_group: "g".to_owned(),
            capacity: ResourceSlots::from_pairs([("cpu", cpu), ("cuda.device", gpu)]),
        }
    }

    #[test]
    fn a_cluster_never_fits_when_no_single_agent_holds_all_its_containers() {
        let agents = [agent("a", 8.0, 2.0), agent("b", 16.0, 0.0)];
        let request = |cpu: f64, gpu: f64, n: u32| {
            ResourceRequest::new(ResourceSlots::from_pairs([("cpu", cpu), ("cuda.device", gpu)]), n)
        };
        assert!(never_fits(&request(8.0, 0.0, 2), &agents, "g").is_none(), "2 × 8 CPU fit b");
        let Some(DomainError::NeverFits(why, _)) = never_fits(&request(10.0, 0.0, 2), &agents, "g") else {
            panic!("2 × 10 CPU fit no agent")
        };
        assert!(why.contains("20 (2 containers × 10)") && why.contains("largest agent has 16"), "{why}");
        assert!(never_fits(&request(17.0, 0.0, 1), &agents, "g").is_some(), "one container too large");
        let Some(DomainError::NeverFits(why, _)) = never_fits(&request(9.0, 1.0, 1), &agents, "g") else {
            panic!("no agent has both")
        };
        assert!(why.contains("no single agent"), "{why}");
        assert!(never_fits(&request(1.0, 0.0, 1), &[], "g").is_some(), "no agent at all");
    }
}
