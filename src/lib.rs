//! sessiond: the GraphQL API server behind the Sessions page of a compute-session platform.

pub mod config;
pub mod db;
pub mod domain;
pub mod graphql;
pub mod http;
pub mod server;
