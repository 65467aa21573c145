//! The GraphQL schema: one root per operation type, merged from one object per area.
//! Resolvers are thin: they read arguments, call `domain`, and map the result.

pub mod actor;
pub mod apps;
pub mod callbacks;
pub mod compiled;
pub mod configuration;
pub mod context;
pub mod cursor;
pub mod errors;
pub mod export;
pub mod folders;
pub mod ids;
pub mod launch;
pub mod limits;
pub mod loaders;
pub mod node;
pub mod people;
pub mod resource;
pub mod result;
pub mod roots;
pub mod runtime;
pub mod scalars;
pub mod scheduling;
pub mod session;
pub mod session_list;
pub mod session_paging;
pub mod session_values;
pub mod settings;
pub mod subscription;
pub mod templates;
pub mod types;
pub mod viewer;

use async_graphql::{MergedObject, MergedSubscription, SDLExportOptions, Schema, SchemaBuilder};
use sea_orm::DatabaseConnection;

use crate::config::GraphqlLimits;
use crate::domain::launch::LaunchLimits;
use crate::domain::live::Live;
use crate::domain::store::inline::InlineReads;

/// What may be read. Every operation needs a bearer token; what it answers depends on the
/// caller's role and memberships.
#[derive(MergedObject, Default)]
pub struct Query(
    viewer::ViewerQuery,
    node::NodeQuery,
    session_list::SessionQuery,
    launch::LaunchQuery,
    resource::ResourceQuery,
    export::ExportQuery,
    runtime::RuntimeQuery,
    configuration::ConfigurationQuery,
    templates::TemplateQuery,
    folders::FolderQuery,
);

/// What may be changed: launching and ending sessions, templates, folders and the caller's
/// settings.
#[derive(MergedObject, Default)]
pub struct Mutation(
    launch::LaunchMutation,
    settings::SettingsMutation,
    templates::TemplateMutation,
    apps::AppsMutation,
    folders::FolderMutation,
);

/// Live feeds of sessions' events, logs and use, over the WebSocket route only.
#[derive(MergedSubscription, Default)]
pub struct Subscription(subscription::SessionSubscription);

pub type AppSchema = Schema<Query, Mutation, Subscription>;

/// The schema with its cost and depth budgets (the transports check the rest of
/// [`GraphqlLimits`] with [`limits::admit`] first). The default cost budget leaves room for
/// a 500-session page with every field but the detail-panel ones (`schedulingHistory`,
/// `logs`, which a query may select for about 100 sessions), with the page's counts and
/// panels beside it. No extension: with one, every field of every answer goes through it.
fn builder(budgets: &GraphqlLimits) -> SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(Query::default(), Mutation::default(), Subscription::default())
        .limit_complexity(budgets.max_query_cost)
        .limit_depth(budgets.max_query_depth)
        .limit_recursive_depth(limits::recursion_limit(budgets))
        .override_output_type_description::<chrono::DateTime<chrono::Utc>>(scalars::DATE_TIME)
        .override_input_type_description::<chrono::DateTime<chrono::Utc>>(scalars::DATE_TIME)
        .override_output_type_description::<scalars::BigInt>(scalars::BIG_INT)
        .override_input_type_description::<scalars::BigInt>(scalars::BIG_INT)
}

/// The schema the server executes, with its database (and its inline reads, on a SQLite
/// file), live feeds and limits.
pub fn build_schema(
    db: DatabaseConnection,
    inline: Option<InlineReads>,
    live: Live,
    launch: LaunchLimits,
    budgets: &GraphqlLimits,
    runtime: crate::domain::runtime::RuntimeInfo,
) -> AppSchema {
    let builder = builder(budgets).data(db).data(live).data(launch).data(runtime);
    match inline {
        Some(inline) => builder.data(inline).finish(),
        None => builder.finish(),
    }
}

/// Attaches what resolvers read to one request: the viewer, fresh DataLoaders, and the
/// request's budget of aggregates.
pub fn prepare_request(
    request: async_graphql::Request,
    db: &DatabaseConnection,
    viewer: crate::domain::directory::auth::Viewer,
    budgets: &GraphqlLimits,
) -> async_graphql::Request {
    request.data(viewer).data(loaders::loaders(db.clone())).data(limits::Aggregates::new(budgets))
}

/// The same for an operation that may live long (over the WebSocket): its loaders batch but
/// do not cache, so each event of a subscription reads its relations afresh.
pub fn prepare_long_lived(
    request: async_graphql::Request,
    db: &DatabaseConnection,
    viewer: crate::domain::directory::auth::Viewer,
    budgets: &GraphqlLimits,
) -> async_graphql::Request {
    let loaders = loaders::loaders(db.clone());
    loaders.enable_all_cache(false);
    request.data(viewer).data(loaders).data(limits::Aggregates::new(budgets))
}

/// The SDL of the schema, sorted so that the checked-in `schema.graphql` is stable.
pub fn sdl() -> String {
    builder(&GraphqlLimits::default())
        .finish()
        .sdl_with_options(SDLExportOptions::new().sorted_fields().sorted_arguments().sorted_enum_items())
}
