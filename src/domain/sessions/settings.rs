//! Per-user settings of the Sessions page: which resource panel shows, and the session
//! table's columns (order and visibility).

use sea_orm::{ConnectionTrait, EntityTrait, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::user_setting;

use crate::domain::model::{ResourcePanelView, SessionColumnKey};
use crate::domain::{DomainError, DomainResult, InputProblem, model::clock};

/// Most entries a column list may have: every column once, with room for columns to come.
pub const MAX_COLUMN_ENTRIES: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnSetting {
    pub column: SessionColumnKey,
    pub visible: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserSettings {
    pub resource_panel_view: ResourcePanelView,
    /// Every column exactly once, in display order.
    pub session_list_columns: Vec<ColumnSetting>,
}

impl Default for UserSettings {
    fn default() -> Self {
        Self {
            resource_panel_view: ResourcePanelView::MyTotal,
            session_list_columns: SessionColumnKey::ALL
                .iter()
                .map(|&column| ColumnSetting { column, visible: column.visible_by_default() })
                .collect(),
        }
    }
}

/// Completes a column list: columns left out are appended in default order, hidden, except
/// NAME, which is always shown. Unknown or repeated entries of stored data are dropped (the
/// first one wins).
pub fn complete_columns(columns: impl IntoIterator<Item = ColumnSetting>) -> Vec<ColumnSetting> {
    let mut out: Vec<ColumnSetting> = Vec::with_capacity(SessionColumnKey::ALL.len());
    for c in columns {
        if !out.iter().any(|o| o.column == c.column) {
            out.push(c);
        }
    }
    for &column in SessionColumnKey::ALL {
        if !out.iter().any(|o| o.column == column) {
            out.push(ColumnSetting { column, visible: column == SessionColumnKey::Name });
        }
    }
    out
}

impl UserSettings {
    /// The list's columns as a list of `scope` shows them: the settings, and in everyone's
    /// sessions (scope PROJECT) OWNER shown right after NAME, whatever they say (whose each
    /// session is). The page and the export without columns both show this.
    pub fn columns_shown(&self, scope: crate::domain::sessions::visibility::SessionScope) -> Vec<ColumnSetting> {
        let mut columns = self.session_list_columns.clone();
        if scope == crate::domain::sessions::visibility::SessionScope::Project {
            let owner = ColumnSetting { column: SessionColumnKey::Owner, visible: true };
            columns.retain(|c| c.column != SessionColumnKey::Owner || c.visible);
            if !columns.contains(&owner) {
                let after_name = columns.iter().position(|c| c.column == SessionColumnKey::Name).map_or(0, |i| i + 1);
                columns.insert(after_name, owner);
            }
        }
        columns
    }
}

pub fn columns_to_json(columns: &[ColumnSetting]) -> Value {
    Value::Array(columns.iter().map(|c| json!({"column": c.column.as_str(), "visible": c.visible})).collect())
}

fn columns_from_json(value: &Value) -> Vec<ColumnSetting> {
    let stored = value.as_array().into_iter().flatten().filter_map(|entry| {
        let column = SessionColumnKey::parse(entry.get("column")?.as_str()?)?;
        Some(ColumnSetting { column, visible: entry.get("visible")?.as_bool()? })
    });
    complete_columns(stored)
}

/// The settings of `user_id`, or the defaults when the user never changed them.
pub async fn user_settings(db: &impl ConnectionTrait, user_id: Uuid) -> DomainResult<UserSettings> {
    let row = user_setting::Entity::find_by_id(user_id).one(db).await?;
    Ok(stored(row.map(|r| (r.resource_panel_view, r.session_list_columns))))
}

/// The settings as stored (view, columns), or the defaults when there are none.
pub fn stored(row: Option<(String, Value)>) -> UserSettings {
    let Some((view, columns)) = row else { return UserSettings::default() };
    UserSettings {
        resource_panel_view: ResourcePanelView::parse(&view).unwrap_or(ResourcePanelView::MyTotal),
        session_list_columns: columns_from_json(&columns),
    }
}

/// Writes the settings; on an existing row only `changed` is updated, so that two changes
/// of different settings made at once both stay.
async fn save(
    db: &impl ConnectionTrait,
    user_id: Uuid,
    settings: &UserSettings,
    changed: user_setting::Column,
) -> DomainResult<()> {
    use sea_orm::sea_query::OnConflict;
    user_setting::Entity::insert(user_setting::ActiveModel {
        user_id: Set(user_id),
        resource_panel_view: Set(settings.resource_panel_view.as_str().to_owned()),
        session_list_columns: Set(columns_to_json(&settings.session_list_columns)),
        updated_at: Set(clock::now()),
    })
    .on_conflict(
        OnConflict::column(user_setting::Column::UserId)
            .update_columns([changed, user_setting::Column::UpdatedAt])
            .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}

/// Chooses the resource panel the page shows.
pub async fn set_resource_panel_view(
    db: &impl ConnectionTrait,
    user_id: Uuid,
    view: ResourcePanelView,
) -> DomainResult<UserSettings> {
    let mut settings = user_settings(db, user_id).await?;
    settings.resource_panel_view = view;
    save(db, user_id, &settings, user_setting::Column::ResourcePanelView).await?;
    Ok(settings)
}

/// Sets the session table's columns from the full ordered list the settings dialog sends.
/// A column given twice, or NAME hidden, is refused; columns left out are appended hidden
/// in default order.
pub async fn update_session_list_columns(
    db: &impl ConnectionTrait,
    user_id: Uuid,
    columns: &[ColumnSetting],
) -> DomainResult<UserSettings> {
    if let Some(p) = InputProblem::too_many("columns", columns.len(), MAX_COLUMN_ENTRIES, "columns (each column once)")
    {
        return Err(DomainError::BadInput(vec![p]));
    }
    let mut problems = Vec::new();
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].iter().any(|o| o.column == c.column) {
            problems.push(InputProblem::new(
                "DUPLICATE_COLUMN",
                Some(format!("columns[{i}]")),
                format!("{} is given twice", c.column),
            ));
        }
        if c.column == SessionColumnKey::Name && !c.visible {
            problems.push(InputProblem::new(
                "NAME_ALWAYS_VISIBLE",
                Some(format!("columns[{i}]")),
                "the NAME column cannot be hidden",
            ));
        }
    }
    if !problems.is_empty() {
        return Err(DomainError::BadInput(problems));
    }
    let mut settings = user_settings(db, user_id).await?;
    settings.session_list_columns = complete_columns(columns.iter().copied());
    save(db, user_id, &settings, user_setting::Column::SessionListColumns).await?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyones_sessions_show_their_owner_after_the_name() {
        use crate::domain::sessions::visibility::SessionScope;
        let settings = UserSettings::default();
        let shown = |scope| -> Vec<&str> {
            settings.columns_shown(scope).into_iter().filter(|c| c.visible).map(|c| c.column.as_str()).collect()
        };
        assert_eq!(shown(SessionScope::Mine), ["NAME", "STATUS", "ACCELERATORS", "CPU", "MEMORY", "ELAPSED"]);
        assert_eq!(
            shown(SessionScope::Project),
            ["NAME", "OWNER", "STATUS", "ACCELERATORS", "CPU", "MEMORY", "ELAPSED"]
        );
        assert_eq!(settings.columns_shown(SessionScope::Project).len(), SessionColumnKey::ALL.len(), "once each");
        // Placed by the settings already: left where it is.
        let mut moved = UserSettings::default();
        moved.session_list_columns.retain(|c| c.column != SessionColumnKey::Owner);
        moved.session_list_columns.push(ColumnSetting { column: SessionColumnKey::Owner, visible: true });
        assert_eq!(moved.columns_shown(SessionScope::Project), moved.session_list_columns);
    }

    #[test]
    fn name_left_out_is_still_shown() {
        let columns = complete_columns([ColumnSetting { column: SessionColumnKey::Status, visible: true }]);
        assert_eq!(columns[0].column, SessionColumnKey::Status);
        let name = columns.iter().find(|c| c.column == SessionColumnKey::Name).expect("NAME");
        assert!(name.visible);
        assert_eq!(columns.iter().filter(|c| c.visible).count(), 2);
    }

    #[test]
    fn defaults_show_the_page_columns_first() {
        let d = UserSettings::default();
        let visible: Vec<_> = d.session_list_columns.iter().filter(|c| c.visible).map(|c| c.column.as_str()).collect();
        assert_eq!(visible, ["NAME", "STATUS", "ACCELERATORS", "CPU", "MEMORY", "ELAPSED"]);
        assert_eq!(d.session_list_columns.len(), SessionColumnKey::ALL.len());
        assert_eq!(d.resource_panel_view, ResourcePanelView::MyTotal);
    }

    #[test]
    fn stored_columns_are_completed_and_deduplicated() {
        let stored = json!([
            {"column": "ELAPSED", "visible": true},
            {"column": "NAME", "visible": true},
            {"column": "ELAPSED", "visible": false},
            {"column": "NO_SUCH", "visible": true}
        ]);
        let cols = columns_from_json(&stored);
        assert_eq!(cols.len(), SessionColumnKey::ALL.len());
        assert_eq!(cols[0], ColumnSetting { column: SessionColumnKey::Elapsed, visible: true });
        assert_eq!(cols[1].column, SessionColumnKey::Name);
        assert_eq!(cols[2], ColumnSetting { column: SessionColumnKey::Status, visible: false });
        assert_eq!(columns_from_json(&columns_to_json(&cols)), cols);
    }
}
