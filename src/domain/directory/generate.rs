//! `sessiond generate`: realistic sessions for benchmarks, trials and large-list tests.
//!
//! Deterministic per seed: the same seed gives the same sessions (ids, names, owners,
//! types, statuses, resources and time offsets), placed relative to `now`. Sessions are
//! spread over the project members and the last 90 days; all but the newest few are
//! finished, with timestamps, results and exit codes that agree with their status, and a
//! legal status-transition path. The newest few are PENDING or RUNNING with small requests
//! that fit the demo agents. Everything is written in one transaction with bulk inserts.
//!
//! It is history, not news: its transitions bypass [`crate::domain::lifecycle::commit`] (no
//! sequence lock, no `NOTIFY`), so run it against a database no server is writing to, as
//! the benchmarks do; a running server's subscribers do not see generated sessions.

use chrono::{DateTime, TimeDelta, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{image, keypair, keypair_resource_policy, launch_group, project, project_member, session};
use entity::{session_status_transition as transition, user};

use crate::domain::model::SessionType;
use crate::domain::model::actor::{Actor, rules};
use crate::domain::model::slots::{self, ResourceSlots};
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::reclaim::expiry::Granted;
use crate::domain::{DomainError, DomainResult, directory::catalog, model::clock};

const GIB: f64 = (1u64 << 30) as f64;
// A statement binds at most 32 766 values on SQLite: 500 sessions of 48 columns, 3 000
// transitions of 8.
const SESSIONS_PER_INSERT: usize = 500;
const TRANSITIONS_PER_INSERT: usize = 3000;
/// Sessions created within this window of `now` may still be live.
const LIVE_WINDOW_SECS: i64 = 2 * 3600;
const HISTORY_DAYS: i64 = 90;

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub sessions: u64,
    pub seed: u64,
    pub now: DateTime<Utc>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GenerateReport {
    pub sessions: u64,
    pub live: u64,
    pub launch_groups: u64,
    pub transitions: u64,
}

/// Who can own a generated session: a member of a project, with a keypair and the
/// project's default resource group.
struct Owner {
    user_id: Uuid,
    keypair_id: Uuid,
    project_id: Uuid,
    domain_id: Uuid,
    resource_group: String,
    agents: Vec<String>,
    /// What the keypair's policy gives a session.
    granted: Granted,
}

async fn owners(db: &DatabaseConnection) -> DomainResult<Vec<Owner>> {
    let members = project_member::Entity::find()
        .order_by_asc(project_member::Column::ProjectId)
        .order_by_asc(project_member::Column::UserId)
        .all(db)
        .await?;
    let mut out = Vec::new();
    for m in members {
        let Some(kp) = keypair::Entity::find()
            .filter(keypair::Column::UserId.eq(m.user_id))
            .order_by_asc(keypair::Column::CreatedAt)
            .order_by_asc(keypair::Column::Id)
            .one(db)
            .await?
        else {
            continue;
        };
        let Some(p) = project::Entity::find_by_id(m.project_id).one(db).await? else { continue };
        let Some(group) = catalog::project_resource_groups(db, p.id).await?.into_iter().next() else {
            continue;
        };
        let agents = catalog::schedulable_agents(db, Some(std::slice::from_ref(&group.name)))
            .await?
            .into_iter()
            .map(|a| a.id)
            .collect::<Vec<_>>();
        if user::Entity::find_by_id(m.user_id).one(db).await?.is_none() || agents.is_empty() {
            continue;
        }
        let policy = keypair_resource_policy::Entity::find_by_id(kp.resource_policy.clone()).one(db).await?;
        out.push(Owner {
            granted: Granted::of(policy.as_ref()),
            user_id: m.user_id,
            keypair_id: kp.id,
            project_id: p.id,
            domain_id: p.domain_id,
            resource_group: group.name,
            agents,
        });
    }
    Ok(out)
}

struct Catalogue {
    /// (name, supported types, minimum slots)
    images: Vec<(String, Vec<SessionType>, ResourceSlots)>,
}

impl Catalogue {
    fn images_for(&self, ty: SessionType) -> Vec<&(String, Vec<SessionType>, ResourceSlots)> {
        self.images.iter().filter(|(_, types, _)| types.contains(&ty)).collect()
    }
}

async fn catalogue(db: &DatabaseConnection) -> DomainResult<Catalogue> {
    let images = image::Entity::find()
        .order_by_asc(image::Column::Name)
        .all(db)
        .await?
        .into_iter()
        .map(|i| {
            let types = i
                .supported_types
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| SessionType::parse(t.as_str()?))
                .collect();
            Ok((i.name, types, ResourceSlots::from_json(&i.minimum_slots)?))
        })
        .collect::<DomainResult<Vec<_>>>()?;
    Ok(Catalogue { images })
}

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

/// Picks by weight; `weighted` is never empty.
fn weighted<T: Copy>(rng: &mut ChaCha8Rng, weighted: &[(T, u32)]) -> T {
    let total: u32 = weighted.iter().map(|(_, w)| w).sum();
    let mut roll = rng.random_range(0..total);
    for (item, w) in weighted {
        if roll < *w {
            return *item;
        }
        roll -= w;
    }
    weighted[0].0
}

fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

fn base_name(ty: SessionType, rng: &mut ChaCha8Rng) -> &'static str {
    let names: &[&'static str] = match ty {
        SessionType::Interactive => &["notebook", "explore-data", "jupyter-lab", "debug-env", "sandbox"],
        SessionType::Batch => &["train-resnet", "etl-nightly", "finetune-llm", "eval-suite", "render-job"],
        SessionType::Inference => &["serve-llm", "detector-api", "embedder", "ranker-svc"],
        SessionType::Upload => &["upload", "dataset-upload", "files"],
    };
    names[rng.random_range(0..names.len())]
}

/// One step of a status path: from, to, reason, when.
type Step = (Option<SessionStatus>, SessionStatus, Option<&'static str>, DateTime<Utc>);

struct Generated {
    session: session::ActiveModel,
    transitions: Vec<Step>,
}

/// Adds `opts.sessions` generated sessions. Fails if this seed was already generated into
/// the database (its first id exists).
pub async fn generate(db: &DatabaseConnection, opts: &GenerateOptions) -> DomainResult<GenerateReport> {
    let owners = owners(db).await?;
    if owners.is_empty() {
        return Err(DomainError::bad_input(
            "NO_OWNERS",
            None,
            "no project member with a keypair and a resource group: seed the demo data first (serve --demo)",
        ));
    }
    let catalogue = catalogue(db).await?;
    if catalogue.images.is_empty() {
        return Err(DomainError::bad_input("NO_IMAGES", None, "no images: seed the demo data first (serve --demo)"));
    }
    // The first session's id marks the seed: drawn from a stream of its own.
    let mut marker = ChaCha8Rng::seed_from_u64(opts.seed);
    marker.set_stream(1);
    let first_id = uuid_from(&mut marker);
    if session::Entity::find_by_id(first_id).one(db).await?.is_some() {
        return Err(DomainError::bad_input(
            "ALREADY_GENERATED",
            Some("seed".to_owned()),
            format!("sessions of seed {} are already in this database: use another seed", opts.seed),
        ));
    }
    // Types in realistic proportions, among those some image supports.
    let type_weights: Vec<(SessionType, u32)> = [
        (SessionType::Interactive, 45),
        (SessionType::Batch, 35),
        (SessionType::Inference, 12),
        (SessionType::Upload, 8),
    ]
    .into_iter()
    .filter(|(t, _)| !catalogue.images_for(*t).is_empty())
    .collect();
    if type_weights.is_empty() {
        return Err(DomainError::bad_input("NO_IMAGES", None, "no image supports any session type"));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let now = opts.now;
    let live_target = (opts.sessions / 50).min(12);
    let mut report = GenerateReport::default();
    let mut sessions = Vec::with_capacity(opts.sessions as usize);
    let mut transitions = Vec::new();
    let mut groups = Vec::new();
    let mut i: u64 = 0;
    while i < opts.sessions {
        let live = i >= opts.sessions - live_target;
        let owner = pick(&mut rng, &owners);
        let ty = weighted(&mut rng, &type_weights);
        // Now and then a "Launch Multiple Sessions" of 2–5 identical sessions.
        let remaining = opts.sessions - i - if live { 0 } else { live_target };
        let group_size = if !live && remaining >= 2 && rng.random_ratio(1, 40) {
            rng.random_range(2..=5u64).min(remaining)
        } else {
            1
        };
        let created_at = if live {
            now - secs(rng.random_range(60..LIVE_WINDOW_SECS))
        } else {
            now - secs(rng.random_range(LIVE_WINDOW_SECS + 3600..HISTORY_DAYS * 86_400))
        };
        let created_at = clock::truncate(created_at + TimeDelta::microseconds(rng.random_range(0..1_000_000)));
        let (image_name, _, minimum) = *pick(&mut rng, &catalogue.images_for(ty));
        let requested = requested_slots(&mut rng, minimum, image_name, live);
        let base = base_name(ty, &mut rng);
        let launch_group = (group_size > 1).then(|| {
            let id = uuid_from(&mut rng);
            groups.push(launch_group::ActiveModel {
                id: Set(id),
                name: Set(format!("{base}-{}x{i}", opts.seed)),
                count: Set(i32::try_from(group_size).unwrap_or(i32::MAX)),
                owner_id: Set(owner.user_id),
                project_id: Set(owner.project_id),
                created_at: Set(created_at),
            });
            id
        });
        for k in 0..group_size {
            let id = if i == 0 { first_id } else { uuid_from(&mut rng) };
            let name = match launch_group {
                Some(_) => format!("{base}-{}x{i}-{}", opts.seed, k + 1),
                None => format!("{base}-{}x{i}", opts.seed),
            };
            let g = one_session(
                &mut rng,
                GenInput {
                    id,
                    name,
                    ty,
                    owner,
                    image: image_name,
                    requested: &requested,
                    created_at,
                    live,
                    launch_group,
                    now,
                },
            );
            report.transitions += g.transitions.len() as u64;
            for (from, to, reason, at) in g.transitions {
                // Its owner launched it; the rest made it up.
                let actor = if from.is_none() { Actor::User(owner.user_id) } else { Actor::system(rules::GENERATED) };
                transitions.push(crate::domain::lifecycle::transition_row(
                    id,
                    from,
                    to,
                    reason.map(str::to_owned),
                    at,
                    &actor,
                ));
            }
            sessions.push(g.session);
            report.live += u64::from(live);
            i += 1;
        }
    }
    report.sessions = sessions.len() as u64;
    report.launch_groups = groups.len() as u64;

    let txn = crate::domain::begin_write(db).await?;
    for chunk in groups.chunks(SESSIONS_PER_INSERT) {
        launch_group::Entity::insert_many(chunk.to_vec()).exec(&txn).await?;
    }
    for chunk in sessions.chunks(SESSIONS_PER_INSERT) {
        session::Entity::insert_many(chunk.to_vec()).exec(&txn).await?;
    }
    for chunk in transitions.chunks(TRANSITIONS_PER_INSERT) {
        transition::Entity::insert_many(chunk.to_vec()).exec(&txn).await?;
    }
    txn.commit().await?;
    // Counted by the triggers as they went in; folded now, so that the counts read a few
    // rows at once.
    crate::domain::sessions::tally::fold(db).await?;
    Ok(report)
}

fn uuid_from(rng: &mut ChaCha8Rng) -> Uuid {
    uuid::Builder::from_random_bytes(rng.random()).into_uuid()
}

fn requested_slots(rng: &mut ChaCha8Rng, minimum: &ResourceSlots, image: &str, live: bool) -> ResourceSlots {
    let mut r = ResourceSlots::new();
    if live {
        // Small enough that every live session fits the demo agents and quotas.
        r.set(slots::CPU, 1f64.max(minimum.get(slots::CPU)));
        r.set(slots::MEM, GIB.max(minimum.get(slots::MEM)));
        return r;
    }
    r.set(slots::CPU, pick(rng, &[0.5f64, 1.0, 2.0, 4.0, 8.0]).max(minimum.get(slots::CPU)));
    r.set(slots::MEM, (pick(rng, &[1.0f64, 2.0, 4.0, 8.0, 16.0]) * GIB).max(minimum.get(slots::MEM)));
    if image.contains("cuda") {
        let gpus: f64 = *pick(rng, &[0.0, 1.0, 1.0, 2.0]);
        if gpus > 0.0 {
            r.set("cuda.device", gpus);
        }
    }
    r
}

struct GenInput<'a> {
    id: Uuid,
    name: String,
    ty: SessionType,
    owner: &'a Owner,
    image: &'a str,
    requested: &'a ResourceSlots,
    created_at: DateTime<Utc>,
    live: bool,
    launch_group: Option<Uuid>,
    now: DateTime<Utc>,
}

fn one_session(rng: &mut ChaCha8Rng, g: GenInput<'_>) -> Generated {
    use SessionStatus::*;
    let status = if g.live {
        weighted(rng, &[(Pending, 1), (Running, 2)])
    } else {
        weighted(rng, &[(Terminated, 75), (Cancelled, 12), (Error, 13)])
    };
    let t0 = g.created_at;
    let scheduled_at = t0 + secs(rng.random_range(1..120));
    let started_at = scheduled_at + secs(rng.random_range(5..90));
    let run_secs = match g.ty {
        SessionType::Batch => rng.random_range(60..6 * 3600),
        SessionType::Interactive => rng.random_range(600..3 * 86_400),
        SessionType::Inference => rng.random_range(3600..7 * 86_400),
        SessionType::Upload => rng.random_range(60..3600),
    };
    // Finished sessions end before now.
    let ended_at = (started_at + secs(run_secs)).min(g.now - secs(60));

    let mut path: Vec<Step> = vec![(None, Pending, None, t0)];
    let step = |path: &mut Vec<_>, to: SessionStatus, reason: Option<&'static str>, at: DateTime<Utc>| {
        let from =
            path.last().map(|(_, s, _, _): &(Option<SessionStatus>, SessionStatus, Option<&str>, DateTime<Utc>)| *s);
        path.push((from, to, reason, at));
    };
    let start_up = |path: &mut Vec<_>| {
        step(path, Scheduled, None, scheduled_at);
        step(path, Preparing, None, scheduled_at + secs(1));
        step(path, Prepared, None, started_at - secs(2));
        step(path, Creating, None, started_at - secs(1));
        step(path, Running, None, started_at);
    };
    let (mut result, mut exit_code, mut status_info) = (SessionResult::Undefined, None, None);
    let (mut sched, mut started, mut terminated, mut agent) = (None, None, None, None);
    match status {
        Pending => {}
        Running => {
            start_up(&mut path);
            (sched, started) = (Some(scheduled_at), Some(started_at));
            agent = Some(pick(rng, &g.owner.agents).clone());
        }
        Terminated => {
            start_up(&mut path);
            let batch = g.ty == SessionType::Batch;
            let failed = batch && rng.random_ratio(15, 100);
            let reason = if batch { "batch-finished" } else { "user-requested" };
            step(&mut path, Terminating, Some(reason), (ended_at - secs(1)).max(started_at));
            step(&mut path, Terminated, Some(reason), ended_at);
            if batch {
                result = if failed { SessionResult::Failure } else { SessionResult::Success };
                exit_code = Some(if failed { *pick(rng, &[1, 2, 137]) } else { 0 });
            }
            status_info = Some(reason);
            (sched, started, terminated) = (Some(scheduled_at), Some(started_at), Some(ended_at));
            agent = Some(pick(rng, &g.owner.agents).clone());
        }
        Cancelled => {
            let reason = *pick(rng, &["user-requested", "user-requested", "PENDING_TIMEOUT"]);
            let at = (t0 + secs(rng.random_range(10..7200))).min(g.now - secs(60));
            step(&mut path, Cancelled, Some(reason), at);
            status_info = Some(reason);
            terminated = Some(at);
        }
        _ => {
            let reason = *pick(rng, &["image pull failed", "agent lost", "container exited during start-up"]);
            step(&mut path, Scheduled, None, scheduled_at);
            step(&mut path, Preparing, None, scheduled_at + secs(1));
            step(&mut path, Error, Some(reason), scheduled_at + secs(3));
            result = SessionResult::Failure;
            status_info = Some(reason);
            (sched, terminated) = (Some(scheduled_at), Some(scheduled_at + secs(3)));
            agent = Some(pick(rng, &g.owner.agents).clone());
        }
    }
    let held = sched.is_some();
    // A started session was sampled: three samples of the simulated curve, the last at its
    // end (or now).
    let sampled_at = started.map(|from| (from, terminated.unwrap_or(g.now)));
    let (utilization, samples) = match sampled_at {
        Some((from, to)) => {
            let t = (to - from).num_seconds().max(0) as f64;
            let samples: Vec<_> =
                [0.25, 0.5, 1.0].map(|f| crate::domain::runtime::simulated_use_at(g.id, g.requested, t * f)).into();
            let mut uses = serde_json::Map::new();
            for slot in samples[2].keys() {
                let xs: Vec<f64> = samples.iter().filter_map(|s| s.get(slot).copied()).collect();
                let (current, maximum) = (xs[xs.len() - 1], xs.iter().copied().fold(0.0, f64::max));
                uses.insert(slot.clone(), json!([current, xs.iter().sum::<f64>() / xs.len() as f64, maximum]));
            }
            (Value::Object(uses), 3)
        }
        None => (json!({}), 0),
    };
    let used = |slot: &str| utilization.get(slot).and_then(|u| u.get(0)).and_then(Value::as_f64).unwrap_or(0.0);
    let (cpu_used, mem_used) = (used(slots::CPU), used(slots::MEM));
    let environment: Value =
        if g.ty == SessionType::Batch { json!([{"name": "EPOCHS", "value": "10"}]) } else { json!([]) };
    let session = session::ActiveModel {
        id: Set(g.id),
        name: Set(g.name),
        session_type: Set(g.ty.as_str().to_owned()),
        status: Set(status.as_str().to_owned()),
        status_info: Set(status_info.map(str::to_owned)),
        result: Set(result.as_str().to_owned()),
        exit_code: Set(exit_code),
        owner_id: Set(g.owner.user_id),
        keypair_id: Set(g.owner.keypair_id),
        project_id: Set(g.owner.project_id),
        domain_id: Set(g.owner.domain_id),
        resource_group: Set(g.owner.resource_group.clone()),
        image: Set(g.image.to_owned()),
        requested_slots: Set(g.requested.to_json()),
        occupied_slots: Set(if held { g.requested.to_json() } else { json!({}) }),
        cluster_size: Set(1),
        environment: Set(environment),
        startup_command: Set((g.ty == SessionType::Batch).then(|| "python train.py".to_owned())),
        batch_timeout_seconds: Set(None),
        priority: Set(0),
        agent_id: Set(agent),
        launch_group_id: Set(g.launch_group),
        pending_reasons: Set(json!([])),
        created_at: Set(t0),
        scheduled_at: Set(sched),
        started_at: Set(started),
        terminated_at: Set(terminated),
        status_changed_at: Set(path.last().map_or(t0, |(_, _, _, at)| *at)),
        queue_position: Set(None),
        lifetime_seconds: Set(g.owner.granted.lifetime),
        extended_seconds: Set(0),
        extensions: Set(0),
        expiry_warned_for: Set(None),
        utilization: Set(utilization),
        utilization_samples: Set(samples),
        utilization_sampled_at: Set(sampled_at.map(|(_, to)| to)),
        idle: Set(g.owner.granted.idle.clone()),
        active_at: Set(None),
        typed_at: Set(None),
        exempt_idle: Set(false),
        cpu_used: Set(cpu_used),
        mem_used: Set(mem_used),
        // As its transitions say: its owner launched it, the rest was made up.
        status_actor_user_id: Set((path.len() <= 1).then_some(g.owner.user_id)),
        status_actor_rule: Set((path.len() > 1).then(|| rules::GENERATED.to_owned())),
        launched_from_session_id: Set(None),
        launched_from_name: Set(None),
        launched_from_template_id: Set(None),
        starts_at: Set(None),
        callback_url: Set(None),
        callback_on_running: Set(false),
        pending_digest: Set(crate::domain::sessions::occupancy::reasons_digest(&[])),
        pull_progress: Set(None),
        image_digest: Set(None),
        mounts: Set(None),
    };
    Generated { session, transitions: path }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_choice_respects_weights() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let picks: Vec<u8> = (0..1000).map(|_| weighted(&mut rng, &[(0u8, 1), (1u8, 0), (2u8, 3)])).collect();
        assert!(!picks.contains(&1));
        let twos = picks.iter().filter(|p| **p == 2).count();
        assert!((650..850).contains(&twos), "{twos}");
    }
}
