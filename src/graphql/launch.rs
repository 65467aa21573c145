//! Launching sessions (one or many), the dry run, and ending sessions.

use async_graphql::{Context, Enum, ID, InputObject, MaybeUndefined, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::domain::DomainResult;
use crate::domain::launch::{self, LaunchLimits};
use crate::domain::{DomainError, lifecycle::terminate};

use super::context::{bus, db, viewer};
use super::errors::{ApiResult, camel, code_of, with_paths};
use super::ids::{NodeKind, decode_uuid, project_uuid};
use super::limits::AGGREGATE_COST;
use super::session::{LaunchGroup, Session};
use super::types::{PendingReason, SessionType};

/// One resource request: e.g. `{slot: "mem", amount: 1073741824}` (bytes).
#[derive(InputObject)]
pub struct SlotAmountInput {
    /// A slot the server knows, e.g. `cpu`, `mem`, `cuda.device` (UNKNOWN_SLOT otherwise);
    /// each at most once.
    pub slot: String,
    /// Per container, in the slot's unit (cores, bytes for `mem`): not negative, and whole
    /// for a `.device` slot.
    pub amount: f64,
}

/// An environment variable to set in the session.
#[derive(InputObject)]
pub struct EnvVarInput {
    /// Letters, digits and `_`, not starting with a digit, at most 128 bytes; unique in the
    /// list.
    pub name: String,
    /// At most 4096 bytes.
    pub value: String,
}

/// A folder to bind into the session's sandbox.
#[derive(InputObject, Clone)]
pub struct MountInput {
    /// A folder of the launch's project the caller sees (`folders`).
    pub folder: ID,
    /// Where the session sees it: under its home directory, `$HOME` (relative, or absolute under it).
    /// Default: the folder's name.
    pub path: Option<String>,
    /// Read-only; a read-write mount needs write access to the folder. Default false.
    #[graphql(default)]
    pub read_only: bool,
}

impl MountInput {
    fn to_domain(&self) -> crate::domain::storage::mounts::MountRequest {
        crate::domain::storage::mounts::MountRequest {
            folder: decode_uuid(&self.folder, NodeKind::Folder),
            path: self.path.clone(),
            read_only: self.read_only,
        }
    }
}

/// What the session launcher sends. `resources` are per container.
#[derive(InputObject)]
pub struct LaunchSessionInput {
    /// The project to launch in; the caller must be one of its members.
    pub project_id: ID,
    /// 4 to 64 letters, digits, `_`, `.` and `-`, starting and ending with a letter, digit
    /// or `_`; unique among the caller's live sessions (NAME_TAKEN). A batch of
    /// `launchSessions` is named `<name>-1` … `<name>-<count>`.
    pub name: String,
    /// The kind of session; its image and resource group must both take it.
    #[graphql(name = "type", default_with = "Some(SessionType::Interactive)")]
    pub session_type: Option<SessionType>,
    /// The image to run, by name (`images`).
    pub image: String,
    /// Default: the project's first allowed resource group.
    pub resource_group: Option<String>,
    /// What each container asks for, at least the image's `minimumSlots` (at most 64
    /// entries). The whole session asks for this times `clusterSize`.
    pub resources: Vec<SlotAmountInput>,
    /// How many containers, 1 to 64, all placed on one agent.
    #[graphql(default_with = "Some(1)")]
    pub cluster_size: Option<i32>,
    /// Variables set in the session, at most 100.
    pub environment: Option<Vec<EnvVarInput>>,
    /// The command a batch session runs (required for BATCH; at most 8192 bytes). Other
    /// types run their image's own command.
    pub startup_command: Option<String>,
    /// For a batch session only: it is stopped this many seconds after it started (exit code
    /// 124, result FAILURE). Positive; null: no timeout.
    pub batch_timeout_seconds: Option<i32>,
    /// −100 … 100, and at most the keypair policy's `maxPriority`: higher priorities are
    /// scheduled first.
    #[graphql(default_with = "Some(0)")]
    pub priority: Option<i32>,
    /// A retry with the same key returns the first call's result and creates nothing new
    /// (kept at least 24 hours).
    pub idempotency_key: Option<String>,
    /// A batch session waits until then (pending reason NOT_YET): at most a year ahead.
    pub starts_at: Option<DateTime<Utc>>,
    /// A batch session waits until these sessions of its project (at most 20, ones the
    /// caller may see) have TERMINATED with SUCCESS (pending reason DEPENDENCY), and is
    /// CANCELLED when one ends otherwise.
    pub depends_on: Option<Vec<ID>>,
    /// Told of the session's end (every terminal status) by a signed JSON POST, retried
    /// until delivered (see `Session.callbacks`, `Viewer.callbackSigningKey`). The host
    /// must be one the server's `--callback-allow` lists.
    pub callback_url: Option<String>,
    /// ... and of its start (RUNNING) too.
    #[graphql(default)]
    pub callback_on_running: bool,
    /// Folders bound into the session's sandbox (at most the server's `--max-mounts`,
    /// 16 unless set): each at its path, read-write or read-only. Problems are reported at
    /// `input.mounts[i]`.
    pub mounts: Option<Vec<MountInput>>,
}

/// The API path of a domain field of a launch: `count` as it is, the rest inside `input`.
fn launch_path(field: &str) -> String {
    match field {
        "count" => field.to_owned(),
        "session_type" => "input.type".to_owned(),
        _ => format!("input.{}", camel(field)),
    }
}

impl LaunchSessionInput {
    pub(super) fn to_domain(&self) -> ApiResult<launch::LaunchRequest> {
        Ok(launch::LaunchRequest {
            project_id: project_uuid(&self.project_id)?,
            name: self.name.clone(),
            session_type: self.session_type.unwrap_or(SessionType::Interactive).into(),
            image: self.image.clone(),
            resource_group: self.resource_group.clone(),
            resources: self.resources.iter().map(|r| (r.slot.clone(), r.amount)).collect(),
            cluster_size: self.cluster_size.unwrap_or(1),
            environment: self.environment.iter().flatten().map(|e| (e.name.clone(), e.value.clone())).collect(),
            startup_command: self.startup_command.clone(),
            batch_timeout_seconds: self.batch_timeout_seconds.map(i64::from),
            priority: self.priority.unwrap_or(0),
            idempotency_key: self.idempotency_key.clone(),
            origin: None,
            starts_at: self.starts_at,
            depends_on: self.depends_on.iter().flatten().map(|id| decode_uuid(id, NodeKind::Session)).collect(),
            callback_url: self.callback_url.clone(),
            callback_on_running: self.callback_on_running,
            image_digest: None,
            mounts: self.mounts.iter().flatten().map(MountInput::to_domain).collect(),
        })
    }
}

/// What `relaunchSession` changes of the session's launch; a field left out is as it was.
#[derive(InputObject, Default)]
pub struct RelaunchOverrides {
    /// Another name, under the launch's rules (with `launchSessions`: the base of
    /// `<name>-1` …).
    pub name: Option<String>,
    /// Another kind of session.
    #[graphql(name = "type")]
    pub session_type: Option<SessionType>,
    /// Another image, by name.
    pub image: Option<String>,
    /// Another resource group the project may use.
    pub resource_group: Option<String>,
    /// Per container; replaces the whole request.
    pub resources: Option<Vec<SlotAmountInput>>,
    /// Another number of containers, 1 to 64.
    pub cluster_size: Option<i32>,
    /// Replaces every variable.
    pub environment: Option<Vec<EnvVarInput>>,
    /// Null: none.
    pub startup_command: MaybeUndefined<String>,
    /// Null: none.
    pub batch_timeout_seconds: MaybeUndefined<i32>,
    /// Another priority, −100 … 100.
    pub priority: Option<i32>,
    /// As `launchSession`'s.
    pub idempotency_key: Option<String>,
    /// Null: none.
    pub callback_url: MaybeUndefined<String>,
    /// Whether the callback is told of the session's start too, as `launchSession`'s.
    pub callback_on_running: Option<bool>,
    /// Run what the image's reference names now (a tag's newest), not the digest the
    /// session ran (`image { digest }`). Default false.
    #[graphql(default)]
    pub newest_image: bool,
    /// Replaces every mount.
    pub mounts: Option<Vec<MountInput>>,
}

/// What is left of `v`: `None` when undefined, `Some(None)` when null.
fn given<T, U>(v: MaybeUndefined<T>, f: impl FnOnce(T) -> U) -> Option<Option<U>> {
    match v {
        MaybeUndefined::Undefined => None,
        MaybeUndefined::Null => Some(None),
        MaybeUndefined::Value(v) => Some(Some(f(v))),
    }
}

impl RelaunchOverrides {
    fn into_domain(self) -> launch::relaunch::Overrides {
        launch::relaunch::Overrides {
            name: self.name,
            session_type: self.session_type.map(Into::into),
            image: self.image,
            resource_group: self.resource_group,
            resources: self.resources.map(|rs| rs.into_iter().map(|r| (r.slot, r.amount)).collect()),
            cluster_size: self.cluster_size,
            environment: self.environment.map(|es| es.into_iter().map(|e| (e.name, e.value)).collect()),
            startup_command: given(self.startup_command, |c| c),
            batch_timeout_seconds: given(self.batch_timeout_seconds, i64::from),
            priority: self.priority,
            idempotency_key: self.idempotency_key,
            callback_url: given(self.callback_url, |u| u),
            callback_on_running: self.callback_on_running,
            newest_image: self.newest_image,
            mounts: self.mounts.map(|ms| ms.iter().map(MountInput::to_domain).collect()),
        }
    }
}

/// The API path of a domain field of a relaunch: inside `overrides`.
fn relaunch_path(field: &str) -> String {
    match field {
        "session_type" => "overrides.type".to_owned(),
        _ => format!("overrides.{}", camel(field)),
    }
}

/// What `launchSession` and `relaunchSession` made.
#[derive(SimpleObject)]
pub struct LaunchSessionPayload {
    /// The session launched: PENDING when new; for a repeated idempotency key, the first
    /// call's session as it now is.
    pub session: Session,
}

/// What `launchSessions` made.
#[derive(SimpleObject)]
pub struct LaunchSessionsPayload {
    /// The launch group that holds them (`SessionFilter.launchGroupId` lists them).
    pub launch_group: LaunchGroup,
    /// The sessions launched, `<name>-1` first.
    pub sessions: Vec<Session>,
}

/// A problem a launch would have.
#[derive(SimpleObject)]
pub struct InputProblem {
    /// A stable code, e.g. INVALID_NAME, UNKNOWN_IMAGE, OUT_OF_RANGE, NEVER_FITS, NAME_TAKEN;
    /// MORE_PROBLEMS when some were left out.
    pub code: String,
    /// Path of the field, e.g. `input.resources[1]`; null when not about one field.
    pub field: Option<String>,
    /// The problem in words, for people.
    pub message: String,
}

/// The dry run of a launch.
#[derive(SimpleObject)]
pub struct LaunchCheck {
    /// Whether the launch would be accepted.
    pub valid: bool,
    /// Every reason it would be refused (input problems, NEVER_FITS, QUOTA_EXCEEDED, NAME_TAKEN).
    pub problems: Vec<InputProblem>,
    /// Whether it would start at once.
    pub fits_now: bool,
    /// Why it would wait, when valid but not fitting now.
    pub pending_reasons: Vec<PendingReason>,
}

/// What `terminateSessions` did to one session.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::lifecycle::terminate::TerminateOutcome")]
pub enum TerminateOutcome {
    /// It was PENDING: it is CANCELLED at once.
    Cancelled,
    /// It had started: it is TERMINATING, and its engine stops it.
    Terminating,
    /// It had started and `force` was given: it is TERMINATED at once.
    Terminated,
    /// Nothing to do: it had already ended, or was already TERMINATING (without `force`).
    Skipped,
    /// No such session, or not one the caller may see.
    NotFound,
}

/// The outcome of ending one requested session.
#[derive(SimpleObject)]
pub struct TerminateResult {
    /// The session's id, as requested (named `sessionId`, not `id`: this result is not the
    /// session, and a cache keyed on `id` would take it for one).
    pub session_id: ID,
    /// What happened to it.
    pub outcome: TerminateOutcome,
    /// The session after the request; null when NOT_FOUND.
    pub session: Option<Session>,
}

/// What `terminateSessions` did.
#[derive(SimpleObject)]
pub struct TerminateSessionsPayload {
    /// One result per requested id, in request order.
    pub results: Vec<TerminateResult>,
}

/// What `modifySessions` did to one session.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::lifecycle::modify::ModifyOutcome")]
pub enum ModifyOutcome {
    /// Changed as asked.
    Modified,
    /// It already had that name and priority.
    Unchanged,
    /// No such session, or not one the caller may see or work on.
    NotFound,
    /// A priority changes only while the session is PENDING.
    NotPending,
    /// Its owner may only lower its priority; raising it is for an administrator.
    Forbidden,
    /// Another live session of its owner has that name.
    NameTaken,
    /// Above the `maxPriority` of the session's keypair policy.
    PriorityLimit,
}

/// What `modifySessions` changes: at least one of them.
#[derive(InputObject)]
pub struct ModifySessionInput {
    /// A new name (one session at a time; the launch's name rules, unique among its owner's
    /// live sessions).
    pub name: Option<String>,
    /// A new priority, for PENDING sessions (−100 … 100).
    pub priority: Option<i32>,
}

/// The outcome of modifying one requested session.
#[derive(SimpleObject)]
pub struct ModifyResult {
    /// The session's id, as requested (named `sessionId`, not `id`: this result is not the
    /// session, and a cache keyed on `id` would take it for one).
    pub session_id: ID,
    /// What happened to it: MODIFIED, UNCHANGED, NOT_FOUND, or why it was refused.
    pub outcome: ModifyOutcome,
    /// The session after the request; null when NOT_FOUND.
    pub session: Option<Session>,
}

/// What `modifySessions` did.
#[derive(SimpleObject)]
pub struct ModifySessionsPayload {
    /// One result per requested id, in request order.
    pub results: Vec<ModifyResult>,
}

/// Where a modification's problem is in this API: `ids`, or a field of `input`.
fn modify_path(field: &str) -> String {
    if field == "ids" || field == "input" { field.to_owned() } else { format!("input.{}", camel(field)) }
}

/// The launch bounds the server was configured with.
pub(super) fn launch_limits(ctx: &Context<'_>) -> ApiResult<LaunchLimits> {
    limits(ctx)
}

fn limits<'a>(ctx: &Context<'a>) -> ApiResult<LaunchLimits> {
    ctx.data_opt::<LaunchLimits>()
        .cloned()
        .ok_or_else(|| DomainError::invariant("the schema was built without launch limits").into())
}

#[derive(Default)]
pub struct LaunchQuery;

#[Object]
impl LaunchQuery {
    /// A dry run of `launchSession` (count 1) or `launchSessions`: the same checks and
    /// codes, nothing written.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn check_launch(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The launch to check, as `launchSession` or `launchSessions` would take it.")]
        input: LaunchSessionInput,
        #[graphql(
            default_with = "Some(1)",
            desc = "1 checks `launchSession`; any other number checks `launchSessions` with that `count`."
        )]
        count: Option<i32>,
    ) -> ApiResult<LaunchCheck> {
        let count = count.unwrap_or(1);
        let dom_input = input.to_domain()?;
        let count = (count != 1).then_some(i64::from(count));
        let check = super::limits::aggregate(ctx, async {
            Ok((launch::check(db(ctx)?, viewer(ctx)?, &dom_input, count, limits(ctx)?).await?, 0))
        })
        .await?;
        let (shown, more) = crate::domain::error::shown(&check.problems);
        let mut problems: Vec<InputProblem> = shown
            .iter()
            .map(|p| InputProblem {
                code: p.code.clone(),
                field: p.field.as_deref().map(launch_path),
                message: p.message.clone(),
            })
            .collect();
        if more > 0 {
            problems.push(InputProblem {
                code: "MORE_PROBLEMS".to_owned(),
                field: None,
                message: format!("{more} more problems not listed"),
            });
        }
        if let Some(refusal) = check.refusal {
            problems.push(InputProblem {
                code: code_of(&refusal).to_owned(),
                field: check.refusal_field.as_deref().map(launch_path),
                message: refusal.to_string(),
            });
        }
        Ok(LaunchCheck {
            valid: problems.is_empty(),
            problems,
            fits_now: check.fits_now,
            pending_reasons: check.pending_reasons.into_iter().map(TryInto::try_into).collect::<DomainResult<_>>()?,
        })
    }
}

#[derive(Default)]
pub struct LaunchMutation;

#[Object]
impl LaunchMutation {
    /// Launches one session; it starts PENDING and the scheduler takes it from there.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn launch_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to launch; every problem found is reported at once, at its field's path.")]
        input: LaunchSessionInput,
    ) -> ApiResult<LaunchSessionPayload> {
        let dom_input = input.to_domain()?;
        let launched = launch::launch(db(ctx)?, bus(ctx)?, viewer(ctx)?, &dom_input, None, limits(ctx)?)
            .await
            .map_err(|e| with_paths(e, launch_path))?;
        let session =
            launched.sessions.into_iter().next().ok_or_else(|| DomainError::invariant("a launch without session"))?;
        Ok(LaunchSessionPayload { session: Session::new(session) })
    }

    /// Launches again what made one of the caller's sessions (finished or live): its
    /// image, type, resource group, resources, cluster size, environment, startup command,
    /// batch timeout and priority, each overridable. The same validation, quotas and
    /// idempotency as `launchSession`; anyone else's session is NOT_FOUND. The new session's
    /// `launchedFrom` names it.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn relaunch_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A session of the caller's own, finished or live.")] id: ID,
        #[graphql(desc = "What to change of its launch; a field left out (or no overrides) is as it was launched.")]
        overrides: Option<RelaunchOverrides>,
    ) -> ApiResult<LaunchSessionPayload> {
        let uuid = decode_uuid(&id, NodeKind::Session).ok_or(DomainError::NotFound("session"))?;
        let o = overrides.unwrap_or_default().into_domain();
        let launched = launch::relaunch::relaunch(db(ctx)?, bus(ctx)?, viewer(ctx)?, uuid, o, limits(ctx)?)
            .await
            .map_err(|e| with_paths(e, relaunch_path))?;
        let session =
            launched.sessions.into_iter().next().ok_or_else(|| DomainError::invariant("a launch without session"))?;
        Ok(LaunchSessionPayload { session: Session::new(session) })
    }

    /// "Launch Multiple Sessions": `count` sessions of one configuration, named
    /// `<name>-1` … `<name>-<count>`, in one launch group; all or nothing. The
    /// configuration is `input`, or a template the caller sees (`templateId`) with
    /// `overrides`: exactly one of the two. Sessions from a template name it in
    /// `launchedFrom`.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn launch_sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Every session's configuration; not with `templateId`.")] input: Option<LaunchSessionInput>,
        #[graphql(desc = "A template the caller may launch from (`sessionTemplates`); not with `input`.")]
        template_id: Option<ID>,
        #[graphql(desc = "With `templateId`: what to change of the template; a field left out is as saved.")]
        overrides: Option<RelaunchOverrides>,
        #[graphql(desc = "How many sessions: 1 to the server's `--max-launch-count` (100 unless set).")] count: i32,
    ) -> ApiResult<LaunchSessionsPayload> {
        let (db, bus, viewer, count) = (db(ctx)?, bus(ctx)?, viewer(ctx)?, Some(i64::from(count)));
        let launched = match (input, template_id) {
            (Some(input), None) if overrides.is_none() => {
                launch::launch(db, bus, viewer, &input.to_domain()?, count, limits(ctx)?)
                    .await
                    .map_err(|e| with_paths(e, launch_path))?
            }
            (None, Some(id)) => {
                let uuid = decode_uuid(&id, NodeKind::SessionTemplate).ok_or(DomainError::NotFound("template"))?;
                let o = overrides.unwrap_or_default().into_domain();
                crate::domain::launch::templates::launch_from(db, bus, viewer, uuid, o, count, limits(ctx)?)
                    .await
                    .map_err(|e| with_paths(e, |f| if f == "count" { f.to_owned() } else { relaunch_path(f) }))?
            }
            _ => {
                return Err(DomainError::bad_input(
                    "ONE_OF",
                    Some("input".to_owned()),
                    "give `input`, or `templateId` with `overrides`: one of the two",
                )
                .into());
            }
        };
        let group =
            launched.launch_group.ok_or_else(|| DomainError::invariant("a batch launch without launch group"))?;
        Ok(LaunchSessionsPayload {
            launch_group: LaunchGroup(group),
            sessions: launched.sessions.into_iter().map(Session::new).collect(),
        })
    }

    /// Pushes a running session's expiry back by `seconds` (its lifetime, or its idle
    /// timeout when that comes first), for its owner or an administrator of its project,
    /// within its keypair's policy (`maxExtensionSeconds` per extension, `maxExtensions` per
    /// session): `EXTENSION_LIMIT` beyond them, or for a session whose expiry is a batch
    /// timeout or that has none. Recorded in its scheduling history with who asked. The
    /// session as it now is.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn extend_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A running session the caller may work on.")] id: ID,
        #[graphql(desc = "How far to push its expiry back, in seconds: at least 1, at most `maxExtensionSeconds`.")]
        seconds: i32,
    ) -> ApiResult<Session> {
        let uuid = decode_uuid(&id, NodeKind::Session).ok_or(DomainError::NotFound("session"))?;
        let s =
            crate::domain::reclaim::expiry::extend(db(ctx)?, bus(ctx)?, viewer(ctx)?, uuid, i64::from(seconds)).await?;
        Ok(Session::new(s))
    }

    /// Exempts a session from idle checks (`exempt: true`), or puts it back under them, for
    /// an administrator of its project: its owner gets FORBIDDEN. Recorded in its scheduling
    /// history with who did it. The session as it now is.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn exempt_from_idle(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A session of a project the caller administers.")] id: ID,
        #[graphql(desc = "True exempts it from idle checks; false puts it back under them.")] exempt: bool,
    ) -> ApiResult<Session> {
        let uuid = decode_uuid(&id, NodeKind::Session).ok_or(DomainError::NotFound("session"))?;
        let s = crate::domain::reclaim::idle::exempt(db(ctx)?, bus(ctx)?, viewer(ctx)?, uuid, exempt).await?;
        Ok(Session::new(s))
    }

    /// Renames a session, or reprioritises PENDING ones: at most `--max-launch-count` ids.
    /// An owner may lower their own session's priority; an administrator of its project may
    /// set any, up to its keypair policy's `maxPriority`. One outcome per id (MODIFIED,
    /// UNCHANGED, NOT_FOUND or why it was refused), in request order; a refused session is
    /// left as it was. Recorded in each session's scheduling history with who did it; the
    /// scheduler takes a new priority at its next pass.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn modify_sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The sessions: at least one, at most the server's `--max-launch-count` (100 unless set).")]
        ids: Vec<ID>,
        #[graphql(desc = "What to change: a new name (for one session only), a new priority, or both.")]
        input: ModifySessionInput,
    ) -> ApiResult<ModifySessionsPayload> {
        let uuids: Vec<Option<uuid::Uuid>> = ids.iter().map(|id| decode_uuid(id, NodeKind::Session)).collect();
        let m = crate::domain::lifecycle::modify::Modification { name: input.name, priority: input.priority };
        let max = limits(ctx)?.max_count;
        let outcomes = crate::domain::lifecycle::modify::modify(db(ctx)?, bus(ctx)?, viewer(ctx)?, &uuids, &m, max)
            .await
            .map_err(|e| with_paths(e, modify_path))?;
        Ok(ModifySessionsPayload {
            results: ids
                .into_iter()
                .zip(outcomes)
                .map(|(session_id, (outcome, session))| ModifyResult {
                    session_id,
                    outcome: outcome.into(),
                    session: session.map(Session::new),
                })
                .collect(),
        })
    }

    /// Ends sessions: PENDING → CANCELLED, started → TERMINATING (or TERMINATED with
    /// `force`), terminal → SKIPPED, invisible or unknown → NOT_FOUND.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn terminate_sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The sessions to end: at most 500.")] ids: Vec<ID>,
        #[graphql(
            default_with = "Some(false)",
            desc = "End started sessions at once (TERMINATED), not through TERMINATING."
        )]
        force: Option<bool>,
    ) -> ApiResult<TerminateSessionsPayload> {
        let uuids: Vec<Option<uuid::Uuid>> = ids.iter().map(|id| decode_uuid(id, NodeKind::Session)).collect();
        let outcomes = terminate::terminate(db(ctx)?, bus(ctx)?, viewer(ctx)?, &uuids, force.unwrap_or(false)).await?;
        Ok(TerminateSessionsPayload {
            results: ids
                .into_iter()
                .zip(outcomes)
                .map(|(session_id, (outcome, session))| TerminateResult {
                    session_id,
                    outcome: outcome.into(),
                    session: session.map(Session::new),
                })
                .collect(),
        })
    }
}
