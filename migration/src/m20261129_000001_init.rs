//! The whole domain model of DESIGN §2: tenancy, credentials and policies, the resource
//! catalogue (slot types, resource groups, agents, images), sessions with their
//! transitions, scheduling history and logs, launch groups, settings and idempotency keys.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261129_000001_init"
    }
}

/// Statuses after which a session holds nothing and its name may be reused.
/// Mirrors `SessionStatus::is_terminal` in the server; the partial unique index needs it
/// as SQL text.
const TERMINAL_STATUSES_SQL: &str = "('TERMINATED', 'CANCELLED', 'ERROR')";

fn fk(name: &str, from: (&'static str, &'static str), to: (&'static str, &'static str)) -> ForeignKeyCreateStatement {
    ForeignKey::create().name(name).from(from.0, from.1).to(to.0, to.1).on_delete(ForeignKeyAction::Cascade).take()
}

fn created_at() -> ColumnDef {
    timestamp_with_time_zone("created_at")
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("domains")
                .col(pk_uuid("id"))
                .col(string_uniq("name"))
                .col(json_binary("total_resource_slots"))
                .col(created_at())
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("projects")
                .col(pk_uuid("id"))
                .col(uuid("domain_id"))
                .col(string("name"))
                .col(json_binary("total_resource_slots"))
                .col(created_at())
                .foreign_key(&mut fk("fk_projects_domain", ("projects", "domain_id"), ("domains", "id")))
                .take(),
        )
        .await?;
        index(m, "ux_projects_domain_name", "projects", &["domain_id", "name"], true).await?;

        m.create_table(
            Table::create()
                .table("users")
                .col(pk_uuid("id"))
                .col(uuid("domain_id"))
                .col(string_uniq("email"))
                .col(string("full_name"))
                .col(string("role"))
                .col(created_at())
                .foreign_key(&mut fk("fk_users_domain", ("users", "domain_id"), ("domains", "id")))
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("project_members")
                .col(uuid("project_id"))
                .col(uuid("user_id"))
                .col(created_at())
                .primary_key(Index::create().col("project_id").col("user_id"))
                .foreign_key(&mut fk("fk_members_project", ("project_members", "project_id"), ("projects", "id")))
                .foreign_key(&mut fk("fk_members_user", ("project_members", "user_id"), ("users", "id")))
                .take(),
        )
        .await?;
        index(m, "ix_project_members_user", "project_members", &["user_id"], false).await?;

        m.create_table(
            Table::create()
                .table("keypair_resource_policies")
                .col(string("name").primary_key())
                .col(json_binary("total_resource_slots"))
                .col(integer("max_concurrent_sessions"))
                .col(integer("max_pending_sessions"))
                .col(big_integer_null("max_session_lifetime_seconds"))
                .col(created_at())
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("keypairs")
                .col(pk_uuid("id"))
                .col(uuid("user_id"))
                .col(string_uniq("access_key"))
                .col(string_uniq("secret_hash"))
                .col(string("resource_policy"))
                .col(boolean("is_active"))
                .col(created_at())
                .foreign_key(&mut fk("fk_keypairs_user", ("keypairs", "user_id"), ("users", "id")))
                .foreign_key(&mut fk(
                    "fk_keypairs_policy",
                    ("keypairs", "resource_policy"),
                    ("keypair_resource_policies", "name"),
                ))
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("slot_types")
                .col(string("name").primary_key())
                .col(string("kind"))
                .col(string("unit"))
                .col(string("display_name"))
                .col(integer("position"))
                .take(),
        )
        .await?;

        // The slots sessiond knows; a request naming any other slot is refused.
        m.get_connection()
            .execute_unprepared(
                "INSERT INTO slot_types (name, kind, unit, display_name, position) VALUES \
                 ('cpu', 'cpu', 'count', 'CPU', 0), \
                 ('mem', 'mem', 'bytes', 'Memory', 1), \
                 ('cuda.device', 'accelerator', 'count', 'CUDA GPU', 2), \
                 ('cuda.shares', 'accelerator', 'count', 'CUDA fractional GPU', 3), \
                 ('rocm.device', 'accelerator', 'count', 'ROCm GPU', 4)",
            )
            .await?;

        m.create_table(
            Table::create()
                .table("resource_groups")
                .col(string("name").primary_key())
                .col(string("description"))
                .col(string("scheduler"))
                .col(big_integer_null("pending_timeout_seconds"))
                .col(json_binary("allowed_session_types"))
                .col(created_at())
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("resource_group_projects")
                .col(string("resource_group"))
                .col(uuid("project_id"))
                .col(integer("position"))
                .primary_key(Index::create().col("resource_group").col("project_id"))
                .foreign_key(&mut fk(
                    "fk_rgp_group",
                    ("resource_group_projects", "resource_group"),
                    ("resource_groups", "name"),
                ))
                .foreign_key(&mut fk("fk_rgp_project", ("resource_group_projects", "project_id"), ("projects", "id")))
                .take(),
        )
        .await?;
        index(m, "ix_rgp_project", "resource_group_projects", &["project_id", "position"], false).await?;

        m.create_table(
            Table::create()
                .table("agents")
                .col(string("id").primary_key())
                .col(string("resource_group"))
                .col(json_binary("available_slots"))
                .col(string("status"))
                .col(boolean("schedulable"))
                .col(json_binary("pulled_images"))
                .col(created_at())
                .col(timestamp_with_time_zone("last_heartbeat_at"))
                .foreign_key(&mut fk("fk_agents_group", ("agents", "resource_group"), ("resource_groups", "name")))
                .take(),
        )
        .await?;
        index(m, "ix_agents_group", "agents", &["resource_group"], false).await?;

        m.create_table(
            Table::create()
                .table("images")
                .col(string("name").primary_key())
                .col(json_binary("supported_types"))
                .col(json_binary("minimum_slots"))
                .col(json_binary("apps"))
                .col(created_at())
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("launch_groups")
                .col(pk_uuid("id"))
                .col(string("name"))
                .col(integer("count"))
                .col(uuid("owner_id"))
                .col(uuid("project_id"))
                .col(created_at())
                .foreign_key(&mut fk("fk_launch_groups_owner", ("launch_groups", "owner_id"), ("users", "id")))
                .foreign_key(&mut fk("fk_launch_groups_project", ("launch_groups", "project_id"), ("projects", "id")))
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("sessions")
                .col(pk_uuid("id"))
                .col(string("name"))
                .col(string("session_type"))
                .col(string("status"))
                .col(text_null("status_info"))
                .col(string("result"))
                .col(integer_null("exit_code"))
                .col(uuid("owner_id"))
                .col(uuid("keypair_id"))
                .col(uuid("project_id"))
                .col(uuid("domain_id"))
                .col(string("resource_group"))
                .col(string("image"))
                .col(json_binary("requested_slots"))
                .col(json_binary("occupied_slots"))
                .col(integer("cluster_size"))
                .col(json_binary("environment"))
                .col(text_null("startup_command"))
                .col(big_integer_null("batch_timeout_seconds"))
                .col(integer("priority"))
                .col(string_null("agent_id"))
                .col(uuid_null("launch_group_id"))
                .col(json_binary("pending_reasons"))
                .col(created_at())
                .col(timestamp_with_time_zone_null("scheduled_at"))
                .col(timestamp_with_time_zone_null("started_at"))
                .col(timestamp_with_time_zone_null("terminated_at"))
                .col(timestamp_with_time_zone("status_changed_at"))
                .foreign_key(&mut fk("fk_sessions_owner", ("sessions", "owner_id"), ("users", "id")))
                .foreign_key(&mut fk("fk_sessions_keypair", ("sessions", "keypair_id"), ("keypairs", "id")))
                .foreign_key(&mut fk("fk_sessions_project", ("sessions", "project_id"), ("projects", "id")))
                .foreign_key(&mut fk("fk_sessions_domain", ("sessions", "domain_id"), ("domains", "id")))
                .foreign_key(&mut fk("fk_sessions_group", ("sessions", "resource_group"), ("resource_groups", "name")))
                .foreign_key(&mut fk("fk_sessions_image", ("sessions", "image"), ("images", "name")))
                .foreign_key(&mut fk("fk_sessions_agent", ("sessions", "agent_id"), ("agents", "id")))
                .foreign_key(&mut fk(
                    "fk_sessions_launch_group",
                    ("sessions", "launch_group_id"),
                    ("launch_groups", "id"),
                ))
                .take(),
        )
        .await?;
        // The personal list: one owner's sessions in a project, newest first.
        index(
            m,
            "ix_sessions_project_owner_created",
            "sessions",
            &["project_id", "owner_id", "created_at", "id"],
            false,
        )
        .await?;
        // The admin list and the tab counts.
        index(m, "ix_sessions_project_created", "sessions", &["project_id", "created_at", "id"], false).await?;
        index(m, "ix_sessions_project_status", "sessions", &["project_id", "status"], false).await?;
        // The scheduler's queue and occupancy per group.
        index(m, "ix_sessions_group_status", "sessions", &["resource_group", "status"], false).await?;
        index(m, "ix_sessions_owner_status", "sessions", &["owner_id", "status"], false).await?;
        index(m, "ix_sessions_launch_group", "sessions", &["launch_group_id"], false).await?;
        // One live session per owner and name; a terminated name may be reused. Both
        // databases support partial indexes with the same syntax.
        m.get_connection()
            .execute_unprepared(&format!(
                "CREATE UNIQUE INDEX ux_sessions_owner_live_name ON sessions (owner_id, name) \
                 WHERE status NOT IN {TERMINAL_STATUSES_SQL}"
            ))
            .await?;

        m.create_table(
            Table::create()
                .table("session_status_transitions")
                .col(big_pk_auto("id"))
                .col(uuid("session_id"))
                .col(string_null("from_status"))
                .col(string("to_status"))
                .col(text_null("reason"))
                .col(timestamp_with_time_zone("occurred_at"))
                .foreign_key(&mut fk(
                    "fk_transitions_session",
                    ("session_status_transitions", "session_id"),
                    ("sessions", "id"),
                ))
                .take(),
        )
        .await?;
        index(m, "ix_transitions_session", "session_status_transitions", &["session_id", "id"], false).await?;

        m.create_table(
            Table::create()
                .table("scheduling_history")
                .col(big_pk_auto("id"))
                .col(uuid("session_id"))
                .col(string("phase"))
                .col(string_null("from_status"))
                .col(string_null("to_status"))
                .col(string("result"))
                .col(string_null("error_code"))
                .col(text("message"))
                .col(json_binary("sub_steps"))
                .col(integer("attempts"))
                .col(created_at())
                .col(timestamp_with_time_zone("updated_at"))
                .foreign_key(&mut fk("fk_history_session", ("scheduling_history", "session_id"), ("sessions", "id")))
                .take(),
        )
        .await?;
        index(m, "ix_history_session", "scheduling_history", &["session_id", "id"], false).await?;

        m.create_table(
            Table::create()
                .table("session_logs")
                .col(big_pk_auto("id"))
                .col(uuid("session_id"))
                .col(text("line"))
                .col(created_at())
                .foreign_key(&mut fk("fk_logs_session", ("session_logs", "session_id"), ("sessions", "id")))
                .take(),
        )
        .await?;
        index(m, "ix_logs_session", "session_logs", &["session_id", "id"], false).await?;

        m.create_table(
            Table::create()
                .table("user_settings")
                .col(uuid("user_id").primary_key())
                .col(string("resource_panel_view"))
                .col(json_binary("session_list_columns"))
                .col(timestamp_with_time_zone("updated_at"))
                .foreign_key(&mut fk("fk_settings_user", ("user_settings", "user_id"), ("users", "id")))
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("idempotency_keys")
                .col(uuid("user_id"))
                .col(string("key"))
                .col(json_binary("response"))
                .col(created_at())
                .primary_key(Index::create().col("user_id").col("key"))
                .foreign_key(&mut fk("fk_idempotency_user", ("idempotency_keys", "user_id"), ("users", "id")))
                .take(),
        )
        .await?;
        index(m, "ix_idempotency_created", "idempotency_keys", &["created_at"], false).await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            "idempotency_keys",
            "user_settings",
            "session_logs",
            "scheduling_history",
            "session_status_transitions",
            "sessions",
            "launch_groups",
            "images",
            "agents",
            "resource_group_projects",
            "resource_groups",
            "slot_types",
            "keypairs",
            "keypair_resource_policies",
            "project_members",
            "users",
            "projects",
            "domains",
        ] {
            m.drop_table(Table::drop().table(table).take()).await?;
        }
        Ok(())
    }
}

async fn index(
    m: &SchemaManager<'_>,
    name: &str,
    table: &'static str,
    cols: &[&'static str],
    unique: bool,
) -> Result<(), DbErr> {
    let mut stmt = Index::create().name(name).table(table).take();
    for col in cols {
        stmt.col(*col);
    }
    if unique {
        stmt.unique();
    }
    m.create_index(stmt).await
}
