//! The export's query string, read and written in one place: [`request`] reads what
//! `GET /export/sessions.csv` is given, [`link`] writes a signed link to it
//! (`sessionExportUrl`). The parameters are the list's arguments: `projectId`, `scope`,
//! each field of the filter by its API name (the domain's declaration of the filter gives
//! the fields, how each value is written and read, and its checks), `orderBy` and
//! `columns`; a signed link adds `key`, `expires` and `sig`.

use std::collections::BTreeSet;

use crate::domain::DomainError;
use crate::domain::error::camel;
use crate::domain::model::SessionColumnKey;
use crate::domain::model::ids::{self, NodeKind, decode_uuid};
use crate::domain::sessions::export::{ExportRequest, Signature};
use crate::domain::sessions::visibility::SessionScope;
use crate::domain::sessions::{FilterValue, SessionFilter, SessionOrder, SessionOrderField};

/// Where the export is served.
pub const PATH: &str = "/export/sessions.csv";

/// A signed link's own parameters.
pub const SIGNATURE_PARAMETERS: [&str; 3] = ["key", "expires", "sig"];

fn bad(field: &str, message: impl Into<String>) -> DomainError {
    DomainError::bad_input("INVALID_PARAMETER", Some(field.to_owned()), message)
}

/// `CREATED_AT_DESC`-style orders, comma-separated.
fn orders(text: &str) -> Result<Vec<SessionOrder>, DomainError> {
    let order = |s: &str| {
        let (field, direction) = s.rsplit_once('_')?;
        let descending = match direction {
            "ASC" => false,
            "DESC" => true,
            _ => return None,
        };
        Some(SessionOrder { field: SessionOrderField::parse(field)?, descending })
    };
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| order(s).ok_or_else(|| bad("orderBy", format!("`orderBy`: unknown value `{s}`"))))
        .collect()
}

fn text(order: &SessionOrder) -> String {
    format!("{}_{}", order.field.as_str(), if order.descending { "DESC" } else { "ASC" })
}

/// The export a query string asks for. Anything malformed or unknown is BAD_USER_INPUT
/// (naming the parameter), a filter's value refused exactly as the list refuses it; a
/// project id that names no project is NOT_FOUND, as in the list.
pub fn request(params: &[(String, String)]) -> Result<ExportRequest, DomainError> {
    let mut project_id = None;
    let mut scope = SessionScope::Mine;
    let mut filter = SessionFilter::default();
    let mut order = Vec::new();
    let mut columns = None;
    let mut seen = BTreeSet::new();
    for (name, value) in params {
        if !seen.insert(name.as_str()) {
            return Err(bad(name, format!("`{name}` is given twice")));
        }
        if value.contains('\0') {
            return Err(bad(name, format!("`{name}` contains a NUL character")));
        }
        match name.as_str() {
            "projectId" => project_id = Some(value.clone()),
            "scope" => scope = SessionScope::parse(value).ok_or_else(|| bad(name, "`scope` is MINE or PROJECT"))?,
            "orderBy" => order = orders(value)?,
            "columns" => columns = Some(Vec::<SessionColumnKey>::read(name, value).map_err(one)?),
            s if SIGNATURE_PARAMETERS.contains(&s) => {}
            other => {
                let unknown = || bad(other, format!("unknown parameter `{other}`"));
                let field = SessionFilter::FIELDS.iter().find(|f| camel(f) == other).ok_or_else(unknown)?;
                filter.read(field, value).ok_or_else(unknown)?.map_err(one)?;
            }
        }
    }
    let project_id = project_id.ok_or_else(|| bad("projectId", "`projectId` is required"))?;
    let project_id = decode_uuid(&project_id, NodeKind::Project).ok_or(DomainError::NotFound("project"))?;
    if order.is_empty() {
        order.push(SessionOrder::DEFAULT);
    }
    Ok(ExportRequest { project_id, scope, filter, orders: order, columns })
}

fn one(problem: crate::domain::InputProblem) -> DomainError {
    DomainError::BadInput(vec![problem])
}

/// The path of a signed link to the export `request`: what [`request`] reads back.
pub fn link(request: &ExportRequest, signature: &Signature) -> String {
    let mut q: Vec<(String, String)> = vec![
        ("projectId".into(), ids::encode(NodeKind::Project, request.project_id)),
        ("scope".into(), request.scope.as_str().to_owned()),
    ];
    q.extend(request.filter.texts().into_iter().map(|(field, text)| (camel(field), text)));
    q.push(("orderBy".into(), request.orders.iter().map(text).collect::<Vec<_>>().join(",")));
    if let Some(columns) = &request.columns {
        q.push(("columns".into(), columns.text()));
    }
    q.push(("key".into(), signature.keypair_id.to_string()));
    q.push(("expires".into(), signature.expires.to_string()));
    q.push(("sig".into(), signature.mac.clone()));
    format!("{PATH}?{}", serde_urlencoded::to_string(&q).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_reads_back_as_its_request() {
        let mut filter = SessionFilter::default();
        for field in SessionFilter::FIELDS {
            let example = crate::domain::sessions::filter_example(field);
            filter.read(field, &example).expect("a field").expect("a value");
        }
        let request = ExportRequest {
            project_id: uuid::Uuid::new_v4(),
            scope: SessionScope::Project,
            filter,
            orders: vec![SessionOrder { field: SessionOrderField::Name, descending: false }, SessionOrder::DEFAULT],
            columns: Some(vec![SessionColumnKey::Name, SessionColumnKey::Owner]),
        };
        let signature = Signature { keypair_id: uuid::Uuid::new_v4(), expires: 1, mac: "m".into() };
        let link = link(&request, &signature);
        let query = link.strip_prefix(&format!("{PATH}?")).expect("the path");
        let params: Vec<(String, String)> = serde_urlencoded::from_str(query).expect("a query");
        let read = super::request(&params).expect("reads");
        assert_eq!(read.filter, request.filter);
        assert_eq!((read.project_id, read.scope, read.columns), (request.project_id, request.scope, request.columns));
        assert_eq!(read.orders.len(), 2);
    }
}
