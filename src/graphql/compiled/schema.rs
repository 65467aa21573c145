//! The API's output types as its schema says them, read once from the SDL: for each object
//! type, each field's type (the named type, list or not, nullable or not) and whether it
//! takes arguments. A compiled list is planned against it, so that what a field is, and
//! every `__typename`, come from the schema, never from a second list.

use std::collections::HashMap;
use std::sync::OnceLock;

use async_graphql::parser::types::{BaseType, Type, TypeKind, TypeSystemDefinition};

/// One field's type.
#[derive(Clone, Debug)]
pub(super) struct FieldType {
    /// The named type under any list.
    pub named: String,
    pub nullable: bool,
    pub list: bool,
    pub takes_arguments: bool,
}

pub(super) struct Types {
    objects: HashMap<String, HashMap<String, FieldType>>,
}

impl Types {
    fn of(sdl: &str) -> Types {
        let mut objects = HashMap::new();
        let Ok(doc) = async_graphql::parser::parse_schema(sdl) else { return Types { objects } };
        for definition in doc.definitions {
            let TypeSystemDefinition::Type(t) = definition else { continue };
            let TypeKind::Object(object) = &t.node.kind else { continue };
            let fields = object
                .fields
                .iter()
                .map(|f| {
                    let f = &f.node;
                    let ty = field_type(&f.ty.node, !f.arguments.is_empty());
                    (f.name.node.to_string(), ty)
                })
                .collect();
            objects.insert(t.node.name.node.to_string(), fields);
        }
        Types { objects }
    }

    /// The field `field` of the object type `object`.
    pub(super) fn field(&self, object: &str, field: &str) -> Option<&FieldType> {
        self.objects.get(object)?.get(field)
    }

    pub(super) fn is_object(&self, name: &str) -> bool {
        self.objects.contains_key(name)
    }

    #[cfg(test)]
    pub(super) fn fields(&self, object: &str) -> Vec<(&str, &FieldType)> {
        self.objects.get(object).map(|f| f.iter().map(|(n, t)| (n.as_str(), t)).collect()).unwrap_or_default()
    }
}

fn field_type(ty: &Type, takes_arguments: bool) -> FieldType {
    match &ty.base {
        BaseType::Named(name) => {
            FieldType { named: name.to_string(), nullable: ty.nullable, list: false, takes_arguments }
        }
        BaseType::List(item) => {
            let inner = field_type(item, takes_arguments);
            FieldType { named: inner.named, nullable: ty.nullable, list: true, takes_arguments }
        }
    }
}

/// The schema's output types.
pub(super) fn types() -> &'static Types {
    static TYPES: OnceLock<Types> = OnceLock::new();
    TYPES.get_or_init(|| Types::of(&super::super::sdl()))
}
