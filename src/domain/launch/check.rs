//! The dry run of a launch: the same validation and admission, nothing written, and the
//! scheduler's verdict on whether it would start now.

use sea_orm::DatabaseConnection;
use uuid::Uuid;

use super::admission::admissible;
use super::validate::validate;
use super::{LaunchLimits, LaunchRequest};
use crate::domain::directory::auth::Viewer;
use crate::domain::sessions::occupancy;
use crate::domain::{
    DomainError, DomainResult, InputProblem, model::clock, scheduling, scheduling::dependencies, scheduling::planner,
};

/// The dry run: the same validation, nothing written, and whether it would start now.
#[derive(Clone, Debug)]
pub struct LaunchCheck {
    pub problems: Vec<InputProblem>,
    /// A refusal that is not about the input: NEVER_FITS, QUOTA_EXCEEDED, NAME_TAKEN.
    pub refusal: Option<DomainError>,
    /// The input the refusal is about, as problems name fields: `name` for a name taken,
    /// `resources[i]` for the amount no agent can ever hold.
    pub refusal_field: Option<String>,
    pub fits_now: bool,
    pub pending_reasons: Vec<occupancy::PendingReason>,
}

impl LaunchCheck {
    /// Valid, and would wait for `reasons`.
    fn waits(reasons: Vec<occupancy::PendingReason>) -> Self {
        Self { problems: Vec::new(), refusal: None, refusal_field: None, fits_now: false, pending_reasons: reasons }
    }
}

/// What `launch` would do with `req` and `count`, without doing it.
pub async fn check(
    db: &DatabaseConnection,
    viewer: &Viewer,
    req: &LaunchRequest,
    count: Option<i64>,
    limits: LaunchLimits,
) -> DomainResult<LaunchCheck> {
    let plan = match validate(db, viewer, req, count, limits).await {
        Ok(plan) => plan,
        Err(DomainError::BadInput(problems)) => {
            return Ok(LaunchCheck {
                problems,
                refusal: None,
                refusal_field: None,
                fits_now: false,
                pending_reasons: Vec::new(),
            });
        }
        Err(e @ DomainError::NeverFits(..)) => {
            let field = match &e {
                DomainError::NeverFits(_, Some(slot)) => {
                    req.resources.iter().position(|(s, _)| s == slot).map(|i| format!("resources[{i}]"))
                }
                _ => None,
            };
            return Ok(LaunchCheck {
                problems: Vec::new(),
                refusal_field: field.or_else(|| Some("resources".to_owned())),
                refusal: Some(e),
                fits_now: false,
                pending_reasons: Vec::new(),
            });
        }
        Err(e) => return Err(e),
    };
    if let Err(e) = admissible(db, viewer, &plan).await {
        return match e {
            DomainError::QuotaExceeded(_) | DomainError::NameTaken(_) => Ok(LaunchCheck {
                problems: Vec::new(),
                refusal_field: matches!(e, DomainError::NameTaken(_)).then(|| "name".to_owned()),
                refusal: Some(e),
                fits_now: false,
                pending_reasons: Vec::new(),
            }),
            other => Err(other),
        };
    }
    // Set to start later: it waits for that, whatever else.
    if let Some(at) = plan.launch.starts_at.filter(|t| *t > clock::now()) {
        return Ok(LaunchCheck::waits(vec![scheduling::not_yet(at)]));
    }
    // Waiting for others that have not ended yet: it waits for them, whatever else.
    let named: Vec<uuid::Uuid> = plan.launch.depends_on.iter().flatten().copied().collect();
    if !named.is_empty() {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let found = entity::session::Entity::find()
            .filter(entity::session::Column::Id.is_in(crate::domain::padded(named)))
            .all(db)
            .await?;
        if let dependencies::Standing::Waiting(names) = dependencies::standing(&found)? {
            return Ok(LaunchCheck::waits(vec![scheduling::dependency(&names)]));
        }
    }
    // The new sessions, queued behind what is pending, as the scheduler would see them.
    let created = clock::now().timestamp_micros();
    let extra: Vec<planner::PendingSession> = (0..plan.names.len())
        .map(|i| planner::PendingSession {
            id: Uuid::new_v4(),
            owner: viewer.user_id,
            keypair: viewer.keypair_id,
            project: plan.project.id,
            domain: plan.project.domain_id,
            priority: plan.launch.priority,
            created: created + i as i64,
            request: plan.request.clone(),
        })
        .collect();
    let decisions = scheduling::dry_run(db, &plan.resource_group.name, extra).await?;
    let mut reasons: Vec<occupancy::PendingReason> = Vec::new();
    for d in &decisions {
        if let planner::Outcome::Wait { reasons: r, .. } = &d.outcome {
            for reason in &r.reasons {
                if !reasons.contains(reason) {
                    reasons.push(reason.clone());
                }
            }
        }
    }
    // A group the scheduler cannot serve decides nothing: that is not fitting.
    let fits_now = decisions.len() == plan.names.len()
        && decisions.iter().all(|d| matches!(d.outcome, planner::Outcome::Schedule { .. }));
    Ok(LaunchCheck { problems: Vec::new(), refusal: None, refusal_field: None, fits_now, pending_reasons: reasons })
}
