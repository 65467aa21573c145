//! Submitting a scheduled session's job: claimed once across replicas, its session
//! directory written for sessiond's sandbox on the node (the spec, with the image to pull),
//! then the job itself.

use std::collections::BTreeMap;

use sea_orm::{ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};

use entity::{engine_job, session};

use super::client::SlurmError;
use super::{Plan, SlurmEngine, job};
use crate::domain::{DomainResult, model::clock};

/// The images' local environments, the registries their refs name, and their apps.
pub(super) type Declarations<'a> = (
    &'a BTreeMap<String, crate::domain::runtime::environments::LocalImage>,
    &'a BTreeMap<String, crate::domain::runtime::image::registry::Registry>,
    &'a BTreeMap<String, Vec<crate::domain::apps::AppSpec>>,
);

impl SlurmEngine {
    /// Submits a scheduled session's job once: claimed first (a row with no job id yet, which
    /// one replica alone inserts), then submitted, then its id recorded. A refusal fails the
    /// start; a Slurm that does not answer leaves it for the next look.
    pub(super) async fn submit(
        &self,
        db: &DatabaseConnection,
        s: &session::Model,
        declarations: Declarations<'_>,
        lifetime: Option<i64>,
    ) -> DomainResult<Option<Plan>> {
        let claim = engine_job::Entity::insert(engine_job::ActiveModel {
            session_id: Set(s.id),
            engine: Set(self.name.clone()),
            job_id: Set(String::new()),
            submitted_at: Set(clock::now()),
        })
        .on_conflict_do_nothing_on([engine_job::Column::SessionId])
        .exec_without_returning(db)
        .await?;
        if !matches!(claim, sea_orm::TryInsertResult::Inserted(n) if n > 0) {
            return Ok(None); // claimed by another replica
        }
        let release = || engine_job::Entity::delete_by_id(s.id).exec(db);
        let sessiond = self.client.settings().sessiond_on_nodes();
        let images = declarations.0;
        let binds = crate::domain::storage::mounts::binds(db, &[s]).await?.remove(&s.id);
        if sessiond.is_none()
            && let Some(binds) = &binds
        {
            release().await?;
            let why = match binds {
                Err(why) => format!("cannot mount its folders: {why}"),
                Ok(_) => {
                    "its folders are mounted by sessiond's sandbox on the nodes, which this engine does not use".into()
                }
            };
            return Ok(Some(Plan::failed_to_start(s.clone(), &why)));
        }
        if sessiond.is_some()
            && let Err(why) = self.write_session_dir(s, declarations, binds)
        {
            release().await?;
            return Ok(Some(Plan::failed_to_start(s.clone(), &why)));
        }
        match self.client.submit(&job::spec(s, &self.client, images, lifetime, sessiond.as_deref())).await {
            Ok(id) => {
                tracing::debug!(engine = %self.name, session = %s.id, job = id, "submitted");
                engine_job::Entity::update_many()
                    .col_expr(engine_job::Column::JobId, sea_orm::sea_query::Expr::value(id.to_string()))
                    .filter(engine_job::Column::SessionId.eq(s.id))
                    .exec(db)
                    .await?;
                Ok(None)
            }
            Err(SlurmError::Refused(why)) => {
                release().await?;
                Ok(Some(Plan::failed_to_start(s.clone(), &format!("Slurm refused the job: {why}"))))
            }
            Err(e) => {
                release().await?;
                self.answered(Err(&e));
                Ok(None)
            }
        }
    }

    /// The directory a session runs from in sessiond's sandbox on a node: its spec (as the
    /// local runtime's, limits kept by the supervisor's watchdog and by Slurm; an
    /// interactive session's apps started with it, and relayed when they have ports),
    /// handed to the jobs' user.
    fn write_session_dir(
        &self,
        s: &session::Model,
        (images, registries, apps): Declarations<'_>,
        binds: Option<Result<Vec<crate::domain::storage::mounts::Bind>, String>>,
    ) -> Result<(), String> {
        use crate::domain::runtime::local::limits::{DEFAULT_WORK_DIR_LIMIT, Enforcement};
        use crate::domain::runtime::local::{files, session_spec};
        let settings = self.client.settings();
        let sd = job::session_dir(&settings.output_dir, s.id);
        let image = images.get(&s.image).cloned().unwrap_or_default();
        // No node keeps a prepared image for sessiond: each job prepares its own.
        let marker = Some(sd.root.join("prepared"));
        // One image store on the shared directory, for every node (see the design document).
        let pull = crate::domain::runtime::environments::image_pull(
            &image,
            s.image_digest.as_deref(),
            registries,
            std::path::Path::new(&settings.output_dir),
            crate::domain::runtime::environments::DEFAULT_IMAGE_CACHE_LIMIT,
        )?;
        let apps = apps.get(&s.image).map(Vec::as_slice).unwrap_or_default();
        let mut spec =
            session_spec(s, &image, marker, DEFAULT_WORK_DIR_LIMIT, self.grace, Vec::new(), Enforcement::Watchdog)
                .pulling(pull)
                .with_apps(s, apps)
                .mounting(binds)?;
        let ports: Vec<u16> = apps.iter().filter_map(|a| a.port).collect();
        if s.session_type == crate::domain::model::SessionType::Interactive.as_str() && !ports.is_empty() {
            spec.relay = Some(super::relay::Relay::new(settings.relay_bind.clone(), ports));
        }
        // Which GPUs Slurm allocates is known on the node: its supervisor binds them.
        // Its processes are the node's: the supervisor reports what they use.
        spec.report_usage = true;
        spec.slurm_gpus = s.requested_slots.get("cuda.device").and_then(serde_json::Value::as_f64).unwrap_or(0.0) > 0.0;
        std::fs::create_dir_all(sd.work()).map_err(|e| format!("cannot create the session's directory: {e}"))?;
        files::write_json(&sd.spec(), &spec).map_err(|e| format!("cannot write the session's spec: {e}"))?;
        if nix::unistd::geteuid().is_root() && settings.user != "root" {
            let user = nix::unistd::User::from_name(&settings.user)
                .ok()
                .flatten()
                .ok_or_else(|| format!("the jobs' user {} is not known on this server", settings.user))?;
            for path in [sd.root.clone(), sd.work(), sd.spec()] {
                nix::unistd::chown(&path, Some(user.uid), Some(user.gid))
                    .map_err(|e| format!("cannot hand {} to {}: {e}", path.display(), settings.user))?;
            }
        }
        Ok(())
    }
}
