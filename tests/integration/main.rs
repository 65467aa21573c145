//! Integration tests through the public HTTP/GraphQL surface, each on SQLite and PostgreSQL.

mod support;

mod actors;
mod apply;
mod auth;
mod cli;
mod cluster;
mod compiled;
mod conformance;
mod expiry;
mod export;
mod fairness;
mod faults;
mod graphql_http;
mod hardening;
mod idle;
mod launch;
mod launch_rules;
mod local_runtime;
mod modify;
mod panels;
mod panels_by_hand;
mod relaunch;
mod revocation;
mod sandbox_edges;
mod scheduling;
mod scheduling_pass;
mod schema;
mod sessions;
mod sessions_paging;
mod slurm;
mod storage;
mod subscriptions;
mod templates;
mod utilization;
mod ws_client;
